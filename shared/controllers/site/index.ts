export { upsertOwnerReference } from "../../kube/index.ts";
export * from "./api.ts";
export {
  type ClusterComponent,
  ComponentRegistryError,
  conditionOrder,
  disabled,
  failed,
  noSites,
  notReady,
  notReadyAfter,
  type Registry,
  Result,
  reconciled,
  type SiteComponent,
  validateRegistry,
} from "./component.ts";
export {
  defaultSiteRegistry,
  metalmanComponent,
  netComponent,
  netConfigName,
  storageComponent,
} from "./components/index.ts";
export {
  type ComponentResult,
  defaultSiteResyncSeconds,
  outcomeOf,
  publishConditions,
  reconcileClusterComponents,
  reconcileSiteComponents,
  SiteComponentsError,
  type SiteControllerOptions,
  siteController,
  siteControllerName,
} from "./controller.ts";
export {
  type ApplyResult,
  createEnv,
  defaultEnvSettings,
  type Env,
  type ManifestMutator,
  resourceOfObject,
} from "./env.ts";
export {
  buildDefaultNamespace,
  configMapPayloadChanged,
  configMapPayloadHash,
  crdKind,
  isRBACObject,
  retargetNamespaceOf,
  setPodSpecImages,
  siteNodeAffinity,
  siteOwnerReference,
} from "./manifests.ts";
export { siteOperator } from "./operator.ts";
export { defaultSiteConfig, type SiteSettings, siteVariables } from "./settings.ts";
export {
  type ComponentConfig,
  createWatchEnv,
  type EnvSettings,
  type KeyMatch,
  mergeWatches,
  siteFromConfigName,
  type WatchEnv,
  type WatchMap,
} from "./watches.ts";
