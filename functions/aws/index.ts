export { type AwsConfig, AwsConfigError, parseAwsEnv } from "./config.ts";
export { createHandler, type HandlerOptions, handler } from "./handler.ts";
export {
  type AwsQueueOptions,
  awsQueue,
  PutEventsError,
  type ReconcileDetail,
  scheduleName,
} from "./queue.ts";
