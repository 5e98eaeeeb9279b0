export { clusterKube } from "./cluster.ts";
export { type AwsConfig, AwsConfigError, parseAwsEnv } from "./config.ts";
export {
  createHandler,
  type HandlerOptions,
  type HandlerRole,
  handler,
  intake,
  reconcile,
} from "./handler.ts";
export {
  type BatchResponse,
  consumeSqsEvent,
  SendMessageBatchError,
  type SqsQueueOptions,
  sqsQueue,
} from "./queue.ts";
