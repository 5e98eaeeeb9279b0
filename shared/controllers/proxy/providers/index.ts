export {
  createGceProvider,
  type GceProviderOptions,
  gceErrorFrom,
} from "./gce.ts";
export {
  createServiceAccountTokenSource,
  gkeScopes,
  kubeTokenSourceFrom,
  type ServiceAccountKey,
  type TokenSource,
} from "./gce-auth.ts";
export { buildPod, createKubernetesProvider, type KubernetesProviderOptions } from "./kubernetes.ts";
export {
  type CreateRequest,
  type Instance,
  type InstanceShape,
  type InstanceState,
  isNamespaceNotOptedIn,
  isProviderNotFound,
  isRbacRefusal,
  type ListScope,
  managedByTagKey,
  managedByTagValue,
  NamespaceNotOptedInError,
  nameFromUID,
  namespaceNotOptedInReason,
  optInCommand,
  ownerTagKey,
  ownerTags,
  type Provider,
  ProviderError,
  type ProviderErrorClass,
  ProviderNotFoundError,
  type ProvidersByName,
  type Tag,
} from "./provider.ts";
