import type { Resource } from "./port.ts";

/** A built-in kind served at `group`/v1, its plural being its kind in lower case plus "s". */
function v1<const K extends string>(
  group: string,
  kind: K,
  namespaced: boolean,
  resource = `${kind.toLowerCase()}s`,
): Resource & { readonly kind: K } {
  return { group, version: "v1", resource, kind, namespaced };
}

/** Well-known kinds kubefn reads and writes. Controllers define their own CRDs' `Resource`s. */
export const Resources = {
  Namespace: v1("", "Namespace", false),
  Pod: v1("", "Pod", true),
  Secret: v1("", "Secret", true),
  ConfigMap: v1("", "ConfigMap", true),
  Service: v1("", "Service", true),
  ServiceAccount: v1("", "ServiceAccount", true),
  PersistentVolumeClaim: v1("", "PersistentVolumeClaim", true),
  ResourceQuota: v1("", "ResourceQuota", true),
  LimitRange: v1("", "LimitRange", true),
  Event: v1("events.k8s.io", "Event", true),
  Deployment: v1("apps", "Deployment", true),
  StatefulSet: v1("apps", "StatefulSet", true),
  NetworkPolicy: v1("networking.k8s.io", "NetworkPolicy", true, "networkpolicies"),
  PodDisruptionBudget: v1("policy", "PodDisruptionBudget", true),
  Lease: v1("coordination.k8s.io", "Lease", true),
  CustomResourceDefinition: v1("apiextensions.k8s.io", "CustomResourceDefinition", false),
  ClusterRole: v1("rbac.authorization.k8s.io", "ClusterRole", false),
  ClusterRoleBinding: v1("rbac.authorization.k8s.io", "ClusterRoleBinding", false),
  Role: v1("rbac.authorization.k8s.io", "Role", true),
  RoleBinding: v1("rbac.authorization.k8s.io", "RoleBinding", true),
} as const;
