export type {
  ConditionPolarity,
  ControllerDefinition,
  FinalizerDeclaration,
  FinalizerWish,
  PassContext,
  Watch,
  WatchedChange,
} from "./controller.ts";
export { createdReason, ownedStatusReason } from "./controller.ts";
export {
  combineListed,
  DEFAULT_SAFETY_NET_SECONDS,
  type DriftDeclaration,
  type DriftList,
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
  applyErrorPolicy,
  type ErrorPolicy,
  isLatched,
  latchedAt,
  QUOTA_RETRY_SECONDS,
} from "./error-policy.ts";
export { awaitSweep, done, failed, Outcome, type OutcomeMetadata, requeueAfter } from "./outcome.ts";
export { generationChanged, payloadChanged } from "./predicates.ts";
export { applyReadiness, type Readiness, readinessDiffers, SummaryConditionType } from "./readiness.ts";
export {
  createRegistry,
  groupOf,
  MAX_RESYNC_SECONDS,
  MIN_RESYNC_SECONDS,
  type Registry,
  RegistryError,
  resourceKey,
} from "./registry.ts";
