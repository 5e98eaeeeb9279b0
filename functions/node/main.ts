import { createNodeProber } from "../../shared/health/node-prober.ts";
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
} = parseNodeHostEnv(process.env);
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
