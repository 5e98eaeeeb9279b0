export { parseWorkerEnv, type WorkerConfig, WorkerConfigError, type WorkerEnv } from "./config.ts";
export {
  clampDelay,
  DEAD_LETTER_QUEUE,
  MAX_BATCH_BYTES,
  MAX_BATCH_MESSAGES,
  MAX_DELAY_SECONDS,
  MAX_MESSAGE_BYTES,
  queuesPort,
  settle,
} from "./queue.ts";
export { queueStateChanges, type StateChangeMessage, stateChangeMessage } from "./state-changes.ts";
export {
  type AggregatedMetrics,
  createAnalyticsMetrics,
  DROPPED_SERIES,
  type Flushed,
  MAX_POINTS_PER_INVOCATION,
} from "./telemetry.ts";
