import { createLineLog, SettingsError } from "../../shared/app/index.ts";
import { type NodeHostConfig, parseNodeHostEnv } from "./config.ts";
import { startNodeHost } from "./host.ts";

/** `npm start`: the Node host, configured from the environment (see README). */
const config = settingsOrExit();
const log = createLineLog(config.logFormat, undefined, config.settings.logLevel);
const host = await startNodeHost(config, log).catch((err: unknown) => {
  // One line saying what failed, not a stack: a missing kubeconfig, a port in use, a refused install.
  const code = (err as { code?: unknown } | null)?.code;
  log.error("start failed", {
    error: err instanceof Error ? err.message : String(err),
    ...(code === "EADDRINUSE" ? { hint: "set KUBEFN_PORT (or KUBEFN_HOST) to a free address" } : {}),
  });
  process.exit(1);
});
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

/** The settings, or every bad variable on stderr, one a line, and exit code 2. */
function settingsOrExit(): NodeHostConfig {
  try {
    return parseNodeHostEnv(process.env);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    process.stderr.write(`kubefn: ${err.message}\n`);
    process.exit(2);
  }
}
