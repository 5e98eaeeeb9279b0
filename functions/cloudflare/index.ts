export { parseWorkerEnv, type WorkerConfig, WorkerConfigError, type WorkerEnv } from "./config.ts";
export {
  clampDelay,
  consumeBatch,
  isMessage,
  MAX_BATCH_BYTES,
  MAX_BATCH_MESSAGES,
  MAX_DELAY_SECONDS,
  MAX_MESSAGE_BYTES,
  queuesPort,
} from "./queue.ts";
export { createMetrics } from "./telemetry.ts";
