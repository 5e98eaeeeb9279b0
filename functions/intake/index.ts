export {
  type BatchSource,
  createIntakeApp,
  type IntakeOptions,
  MalformedBatchError,
  type MappedBatch,
} from "./app.ts";
export { intakeCloudWatchLogs } from "./cloudwatch-logs.ts";
export { type PubSubOptions, pubsubHandler } from "./pubsub.ts";
export { SIGNATURE_HEADER, signBatch, TIMESTAMP_HEADER, verifyBatch } from "./signature.ts";
export { mapWithRegistry } from "./wire.ts";
