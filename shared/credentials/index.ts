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
