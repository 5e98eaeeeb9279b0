export {
  memoryReplayGuard,
  type ReplayGuard,
  SIGNATURE_HEADER,
  signBatch,
  TIMESTAMP_HEADER,
  verifyBatch,
} from "../../auth/index.ts";
export {
  type BatchSource,
  createIntakeApp,
  type IntakeBatch,
  type IntakeCredentials,
  type IntakeOptions,
  MalformedBatchError,
  type MappedBatch,
} from "./app.ts";
export { type CloudWatchLogsResult, intakeCloudWatchLogs } from "./cloudwatch-logs.ts";
export { type PubSubOptions, pubsubHandler } from "./pubsub.ts";
export { mapWithRegistry } from "./wire.ts";
