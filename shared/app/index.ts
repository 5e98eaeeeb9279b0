/**
 * What a platform uses of the core beside `createKubefn`: the port types it binds, how a platform
 * queue is built from its SDK's batch send (fitting, cutting and batching are the core's), how the
 * Node host keeps one message a key, its sweep Lease, and the span types of its exporter.
 */

export type { AllowListEntry } from "../controllers/index.ts";
export {
  type ClusterDeclaration,
  type Credential,
  type CredentialKind,
  createServiceAccountTokenSource,
  DEFAULT_CLUSTER,
  gkeScopes,
  kubeTokenSourceFrom,
  parseServiceAccountKey,
  type ServiceAccountKey,
} from "../credentials/index.ts";
export {
  batchesOf,
  bodyBytes,
  type Clock,
  carriedBodies,
  cloudEventOf,
  coalesce,
  createSweepLease,
  type DelayedMessage,
  expandedBody,
  type HopEnd,
  type HopKind,
  type Log,
  type Message,
  type Metrics,
  messageBytes,
  messageController,
  messageKey,
  platformQueue,
  type Queue,
  type QueueLimits,
  reconcileResults,
  type Spans,
  STATE_CHANGE_SOURCE,
  type StateChange,
  type StateChangeSink,
  type SweepLease,
  type TraceContext,
} from "../runtime/index.ts";
export {
  type ClusterKubefn,
  clusterMember,
  clusterSettings,
  dispatchByCluster,
  type FleetSweepSummary,
  intakeCredentialsOf,
} from "./cluster-dispatch.ts";
export { clusterLog, clusterMetrics, type FleetMember, fleetFetch } from "./clusters.ts";
export { commaList } from "./env-values.ts";
export { createFunctionsApp, type HttpSettings } from "./http.ts";
export type { IntakeCredentials } from "./intake/index.ts";
export { issuerRoutes, issuerTokenSource } from "./issuer.ts";
export {
  createKubefn,
  type Delivery,
  type Ingest,
  jobLine,
  type Kubefn,
  type KubefnPorts,
  passLine,
  sweepLine,
  type Verdict,
} from "./kubefn.ts";
export {
  allowListEntriesFor,
  allowListNames,
  kubeGoogleCredentialsSchema,
  ownNamespace,
} from "./operator-settings.ts";
export {
  createOperators,
  type ManifestDirectory,
  type ManifestOption,
  manifestDirectoriesOf,
  type OperatorOptions,
  type Operators,
} from "./operators.ts";
export {
  clustersUsableBy,
  describeIssues,
  type KubefnSettings,
  type OidcIssuerSettings,
  parseEnvironment,
  parsePlatformEnv,
  platformSchema,
  SettingsError,
  secretVariable,
  settingsFrom,
  settingsVariables,
} from "./settings.ts";
export { runSweep, type SweepOptions, type SweepSummary } from "./sweep.ts";
export {
  createJsonLog,
  createLineLog,
  families,
  objectLabels,
  PrometheusMetrics,
} from "./telemetry/index.ts";
