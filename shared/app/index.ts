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
export { kubeGoogleCredentialsSchema, ownNamespace, parseServiceAccountKey } from "./operator-settings.ts";
export { createOperators, type OperatorOptions, type Operators } from "./operators.ts";
export {
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
