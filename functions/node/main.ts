import { createLineLog } from "../telemetry/index.ts";
import { parseNodeHostEnv } from "./config.ts";
import { startNodeHost } from "./host.ts";

/** `npm start`: the Node host, configured from the environment (see README). */
const config = parseNodeHostEnv(process.env);
const log = createLineLog(config.logFormat);
const host = await startNodeHost(config, log);
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
