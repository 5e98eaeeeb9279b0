import { createNodeProber } from "../../shared/health/node-prober.ts";
import { readManifestDirectory } from "../../shared/kube/node-manifests.ts";
import { createOperators } from "../operators.ts";
import { parseNodeHostEnv } from "./config.ts";
import { startNodeHost } from "./host.ts";
import { createLineLog } from "./log.ts";

/** `npm start`: the Node host, configured from the environment (see README). */
const {
  config,
  logFormat,
  proxyResyncSeconds,
  minReportIntervalSeconds,
  apiToken,
  orphanGraceSeconds,
  operators,
  siteManifestsDir,
} = parseNodeHostEnv(process.env);
// Read once at start, like every other setting.
const siteManifests = siteManifestsDir ? readManifestDirectory(siteManifestsDir) : undefined;
const log = createLineLog(logFormat);
const host = await startNodeHost(
  config,
  () =>
    createOperators({
      prober: createNodeProber(),
      sweepPeriodSeconds: config.sweepSeconds,
      proxyResyncSeconds,
      minReportIntervalSeconds,
      orphanGraceSeconds,
      ...(apiToken ? { apiToken } : {}),
      settings: operators,
      ...(siteManifests ? { siteManifests } : {}),
    }),
  log,
);
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    host.stop().then(
      () => {
        log.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        log.error("shutdown failed", { error: String(err) });
        process.exit(1);
      },
    );
  });
}
