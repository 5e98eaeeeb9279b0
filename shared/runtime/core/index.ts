export { createSweepMemo, type SweepMemo } from "./memo.ts";
export { type Clock, type Log, type LogLevel, logLevels, type Metrics } from "./observe.ts";
export {
  boundedStateChanges,
  changedCondition,
  cloudEventOf,
  cloudEventType,
  conditionChange,
  DEFAULT_STATE_CHANGES_PER_INVOCATION,
  STATE_CHANGE_SOURCE,
  STATE_CHANGE_VERSION,
  type StateChange,
  type StateChangeSink,
  type StateChangesOf,
  StateChangeType,
} from "./state-changes.ts";
export {
  canonicalJson,
  createStatusSeal,
  derivedSealKeySource,
  isEmptyStatus,
  SEAL_FIELD,
  type StatusSeal,
  statusSealFrom,
} from "./status-seal.ts";
export { type HopEnd, type HopKind, type Spans, type TraceContext, traceFrom } from "./trace.ts";
export {
  type Context,
  clusterOf,
  DEFAULT_CLUSTER,
  type DelayedMessage,
  describeTrigger,
  fitted,
  INVOCATION_READ_MAX_AGE_SECONDS,
  type Job,
  type JobMessage,
  jobKey,
  type Kube,
  type KubeObject,
  type Message,
  messageController,
  messageKey,
  type PassMessage,
  type Queue,
  type Request,
  type Resource,
  requestKey,
  type Trigger,
} from "./types.ts";
