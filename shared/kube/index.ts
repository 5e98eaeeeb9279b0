export { serverSideApply } from "./apply.ts";
export {
  type ApiGuard,
  type ApiGuardStats,
  type CircuitPolicy,
  type CircuitState,
  createApiGuard,
  DEFAULT_CIRCUIT,
  type GuardedKube,
  guardedKube,
} from "./back-pressure.ts";
export {
  type ClassifiedError,
  classifyError,
  type ErrorClass,
  type ErrorClassName,
  isClassifiedError,
  ReconcileError,
} from "./classify.ts";
export {
  type Condition,
  type ConditionInput,
  conditionsOf,
  findCondition,
  formatKubeTime,
  isTrue,
  removeCondition,
  setCondition,
} from "./conditions.ts";
export {
  type CallCounts,
  type CountingTransport,
  countingTransport,
  type RecordedCall,
} from "./counting-transport.ts";
export { covers } from "./covers.ts";
export { defaultRequestTimeoutMs } from "./deadline.ts";
export { type EnsureOptions, type EnsureResult, ensureObject } from "./ensure.ts";
export {
  AlreadyExistsError,
  ClientThrottledError,
  ConflictError,
  errorFromResponse,
  ForbiddenError,
  InvalidError,
  isAlreadyExists,
  isConflict,
  isNotFound,
  KubeError,
  type KubeErrorInit,
  NetworkError,
  NotFoundError,
  parseRetryAfter,
  ServerError,
  type Status,
  type StatusCause,
  type StatusDetails,
  TimeoutError,
  TooManyRequestsError,
  UnauthorizedError,
} from "./errors.ts";
export {
  createEventRecorder,
  type EventInput,
  type EventRecorder,
  type EventRecorderOptions,
  type EventType,
  eventName,
  formatMicroTime,
} from "./events.ts";
export { createFetchTransport, type FetchTransportOptions } from "./fetch-transport.ts";
export { addFinalizer, hasFinalizer, removeFinalizer } from "./finalizers.ts";
export { type CreateKubeOptions, createKube } from "./kube.ts";
export {
  type LabelRequirements,
  matchesRequirements,
  type ParsedSelector,
  parseLabelSelector,
} from "./label-selector.ts";
export {
  formatLabelSelector,
  type LabelSelector,
  type LabelSelectorRequirement,
  labelsMatch,
  mergeLabels,
} from "./labels.ts";
export { defaultPageSize, listAll, listPages } from "./list.ts";
export {
  applyMergePatch,
  diffMergePatch,
  fieldsPatch,
  jsonEqual,
  type MergePatch,
  valueAt,
} from "./merge-patch.ts";
export {
  controllerOf,
  controllerRefTo,
  isControlledBy,
  isOwnedBy,
  upsertOwnerReference,
} from "./owner-references.ts";
export {
  apiVersionOf,
  dnsLabel,
  dnsSubdomain,
  imageReference,
  isNamespaceName,
  isObjectName,
  keyOf,
  type PathParts,
  resourcePath,
} from "./paths.ts";
export type * from "./port.ts";
export { milliValue, quantityPattern, sameQuantity } from "./quantity.ts";
export { Resources, v1Resource } from "./resources.ts";
export { ownNamespace } from "./service-account.ts";
export { canonicalJson, fnv1a32, specHash } from "./spec-hash.ts";
export type { TokenSource } from "./token-source.ts";
