export { auditEventFromLogEntry, type LogEntryReading, logEntryFromAuditEvent } from "./cloud-logging.ts";
export {
  auditItemsOf,
  type CloudWatchLogsData,
  CloudWatchLogsDecodeError,
  decodeCloudWatchLogs,
  encodeCloudWatchLogs,
  isCloudWatchLogsEvent,
} from "./cloudwatch-logs.ts";
export {
  eksAuditFilterPattern,
  gkeAuditLogFilter,
  MAX_FILTER_PATTERN_LENGTH,
  registryResources,
} from "./filter-pattern.ts";
export { type PushDelivery, PushDeliveryError, parsePushDelivery, pushBodyOf } from "./pubsub-push.ts";
