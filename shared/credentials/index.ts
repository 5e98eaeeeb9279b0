export {
  type ClusterDeclaration,
  type Credential,
  type CredentialKind,
  clusterNameSchema,
  clustersSchema,
  clustersVariable,
  credentialKinds,
  credentialSchema,
  DEFAULT_CLUSTER,
  MAX_CLUSTERS,
  unusableCredentials,
} from "./clusters.ts";
export {
  createServiceAccountTokenSource,
  gkeScopes,
  kubeTokenSourceFrom,
  parseServiceAccountKey,
  type ServiceAccountKey,
  type ServiceAccountTokenSourceOptions,
  type TokenFailure,
  type TokenSource,
} from "./google.ts";
