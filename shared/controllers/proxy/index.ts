export {
  defaultInstanceAllowList,
  type InstanceAllowList,
  instanceRefusal,
  isAllowListRefusal,
} from "./allow-list.ts";
export * from "./api.ts";
export {
  CloudInitError,
  defaultCloudInitKey,
  isCloudInitError,
  proxySpecHash,
  type ResolvedCloudInit,
  resolveCloudInit,
  specHashInput,
  specHashPrefix,
} from "./cloud-init.ts";
export { type ProxyControllerDeps, proxyController, proxyControllerName } from "./controller.ts";
export { type DeletionAction, type DeletionObservation, decideDeletion, reconcileDelete } from "./delete.ts";
export { reconcileExternal } from "./external.ts";
export { proxyErrorPolicy } from "./failure.ts";
export {
  type HealthSubjectOptions,
  healthInstanceOf,
  managedProxyPort,
  minReportIntervalSeconds,
  proxyHealthSubject,
} from "./health-subject.ts";
export { type ProxyHealthTaskOptions, probeShardTask, proxyHealthTask } from "./health-task.ts";
export {
  decideManaged,
  type InstanceLookup,
  type ManagedAction,
  type ManagedObservation,
  reconcileManaged,
} from "./managed.ts";
export { proxyOperator } from "./operator.ts";
export { type ProvidersSource, reconcileProxy } from "./reconcile.ts";
export { proxiesForSecret } from "./secret-watch.ts";
export {
  defaultGceNetworkTags,
  type GceSettings,
  type ProxySettings,
  proxyVariables,
} from "./settings.ts";
export { applyHealth, computePhase } from "./status.ts";
export { defaultProxyTimings, type ProxyTimings } from "./timings.ts";
