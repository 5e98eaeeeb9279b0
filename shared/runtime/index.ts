export { type BackoffPolicy, backoffSeconds, DEFAULT_BACKOFF } from "./backoff.ts";
export { coalesce } from "./coalesce.ts";
export type {
  ControllerDefinition,
  FinalizerDeclaration,
  FinalizerWish,
  PassContext,
  Watch,
  WatchedChange,
} from "./controller.ts";
export {
  combineListed,
  DEFAULT_SAFETY_NET_SECONDS,
  type DriftDeclaration,
  type DriftInput,
  type DriftList,
  type DriftReason,
  defineDrift,
  driftDue,
  dueThisSlot,
  type Listed,
  listForDrift,
  listForPage,
  pagesOf,
  SWEEP_PAGE_SIZE,
} from "./drift.ts";
export {
  type Authenticated,
  authenticBodies,
  ENVELOPE_VERSION,
  type Envelope,
  isMessage,
  openEnvelope,
  sealed,
  withoutBodies,
} from "./envelope.ts";
export {
  applyErrorPolicy,
  type ErrorPolicy,
  isLatched,
  latchedAt,
  type PolicyError,
  QUOTA_RETRY_SECONDS,
  RESOLVED_REASON,
} from "./error-policy.ts";
export {
  type AuditEvent,
  auditEventListSchema,
  auditEventSchema,
  auditObjectRefSchema,
  type EventBatch,
  EventBatchError,
  parseEventBatch,
  type RelayBatch,
  type RelayEvent,
  relayBatchSchema,
  relayEventSchema,
} from "./event-batch.ts";
export {
  MAPPED_SUBRESOURCES,
  type MapEventsOptions,
  type MappingCounts,
  type MappingResult,
  mapEvents,
  WRITE_VERBS,
} from "./event-mapping.ts";
export {
  FOREIGN_STATUS_REASON,
  type FollowUp,
  followUpFor,
  IMMEDIATE_CONFLICT_RETRIES,
  LISTED_MAX_AGE_SECONDS,
  type PassResult,
  type PassResultKind,
  type ReconcileResult,
  reconcileResultOf,
  reconcileResults,
  runPass,
} from "./executor.ts";
export {
  INTAKE_CANARY_CONTROLLER,
  INTAKE_CANARY_NAMESPACE,
  INTAKE_CANARY_PREFIX,
  INTAKE_RECEIVED_REASON,
  isIntakeCanary,
} from "./intake-canary.ts";
export { type JobResult, runJob } from "./job.ts";
export {
  batchesOf,
  cutJob,
  ENVELOPE_HEADROOM_BYTES,
  fitToQueue,
  messageBytes,
  platformQueue,
  type QueueLimits,
} from "./message-fit.ts";
export {
  createMessageAuthenticator,
  hasBodies,
  type MessageAuthenticator,
  messageAuthenticatorFrom,
} from "./message-mac.ts";
export {
  awaitSweep,
  done,
  failed,
  Outcome,
  type OutcomeKind,
  type OutcomeMetadata,
  requeueAfter,
} from "./outcome.ts";
export {
  anyOf,
  type ChangePredicate,
  generationChanged,
  type PredicateInput,
  payloadChanged,
} from "./predicates.ts";
export {
  applyReadiness,
  type Readiness,
  readinessDiffers,
  SummaryConditionType,
} from "./readiness.ts";
export {
  createRegistry,
  groupOf,
  isKind,
  MAX_RESYNC_SECONDS,
  MIN_RESYNC_SECONDS,
  type RegisteredWatch,
  type Registry,
  RegistryError,
  resourceKey,
} from "./registry.ts";
export {
  boundedStateChanges,
  changedCondition,
  changeObject,
  cloudEventOf,
  cloudEventType,
  conditionChange,
  DEFAULT_STATE_CHANGES_PER_INVOCATION,
  STATE_CHANGE_SOURCE,
  STATE_CHANGE_VERSION,
  type StateChange,
  type StateChangeCondition,
  type StateChangeDetail,
  type StateChangeObject,
  type StateChangeSink,
  type StateChangesOf,
  StateChangeType,
} from "./state-changes.ts";
export {
  canonicalJson,
  createStatusSeal,
  derivedSealKeySource,
  SEAL_FIELD,
  type SealVerdict,
  type StatusSeal,
  statusSealFrom,
  UNSEALED_STATUS_FIELDS,
} from "./status-seal.ts";
export { OPERATOR_NOT_STARTED, type RefusedController, startable, stoppedController } from "./stopped.ts";
export { planSweep, type SweepInput, type SweepPlan, sweepBucket } from "./sweep.ts";
export {
  createSweepLease,
  type LeaseSighting,
  type LeaseStep,
  leaseStep,
  type ObservedLease,
  type SweepLease,
  type SweepLeaseObject,
  type SweepLeaseOptions,
} from "./sweep-lease.ts";
export {
  type ControllerSweep,
  runSweep,
  type SweepOptions,
  type SweepSummary,
  sweepInstant,
} from "./sweep-run.ts";
export {
  createSweepMemo,
  runSweepTask,
  type SweepMemo,
  type SweepRunInfo,
  type SweepTask,
  type SweepTaskRun,
} from "./sweep-task.ts";
export { type HopEnd, type HopKind, type Spans, type TraceContext, traceFrom } from "./trace.ts";
export type {
  Clock,
  Context,
  Job,
  JobMessage,
  Kube,
  KubeObject,
  Log,
  LogLevel,
  Message,
  Metrics,
  PassMessage,
  Queue,
  Request,
  Resource,
} from "./types.ts";
export {
  describeTrigger,
  fitted,
  INVOCATION_READ_MAX_AGE_SECONDS,
  jobKey,
  logLevels,
  messageController,
  messageKey,
  requestKey,
  type Trigger,
  type TriggerKind,
} from "./types.ts";
