export { milliValue, sameQuantity } from "../../kube/index.ts";
export * from "./api.ts";
export {
  type ConfigResult,
  defaultOperatorConfig,
  type InvalidOperatorConfig,
  type OperatorConfig,
  parseOperatorConfig,
} from "./config.ts";
export {
  type SubPoolControllerDeps,
  subPoolController,
  subPoolControllerName,
  subPoolFromKey,
} from "./controller.ts";
export {
  type DeletionAction,
  type DeletionObservation,
  decideDeletion,
  namespaceBlockers,
  reconcileDeletion,
} from "./deletion.ts";
export {
  buildDesired,
  type DesiredObjects,
  endpointSliceResource,
  gatewayResource,
  httpRouteResource,
  type ManagedObject,
  podSelectorLabels,
  poolLabels,
  subPoolObjectNames,
  subPoolOwnedResources,
} from "./desired.ts";
export { subPoolOperator } from "./operator.ts";
export { type NamespaceOwnership, namespaceOwnership } from "./ownership.ts";
export { newCredentials, reconcileSubPool, routeState, type SubPoolPassDeps } from "./reconcile.ts";
export { type SubPoolSettings, subPoolRecheckRange, subPoolVariables } from "./settings.ts";
export {
  readSharedState,
  type SharedState,
  sharedLookHandler,
  sharedLookSweepTask,
  sharedLookTask,
} from "./shared-look.ts";
export { type ReadinessObservation, readinessConditions } from "./status.ts";
export { defaultSubPoolTimings, type SubPoolTimings } from "./timings.ts";
export { type ResolvedRoute, type Validation, validateSubPool } from "./validate.ts";
