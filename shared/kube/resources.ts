import type { Resource } from "./port.ts";

/** A kind served at `group`/v1, its plural being its kind in lower case plus "s" unless given. */
export function v1Resource<const K extends string>(
  group: string,
  kind: K,
  namespaced: boolean,
  resource = `${kind.toLowerCase()}s`,
): Resource & { readonly kind: K } {
  return { group, version: "v1", resource, kind, namespaced };
}

/** Well-known kinds kubefn reads and writes. Controllers define their own CRDs' `Resource`s. */
export const Resources = {
  Namespace: v1Resource("", "Namespace", false),
  Pod: v1Resource("", "Pod", true),
  Secret: v1Resource("", "Secret", true),
  ConfigMap: v1Resource("", "ConfigMap", true),
  Service: v1Resource("", "Service", true),
  ServiceAccount: v1Resource("", "ServiceAccount", true),
  PersistentVolumeClaim: v1Resource("", "PersistentVolumeClaim", true),
  ResourceQuota: v1Resource("", "ResourceQuota", true),
  LimitRange: v1Resource("", "LimitRange", true),
  Event: v1Resource("events.k8s.io", "Event", true),
  Deployment: v1Resource("apps", "Deployment", true),
  StatefulSet: v1Resource("apps", "StatefulSet", true),
  DaemonSet: v1Resource("apps", "DaemonSet", true),
  NetworkPolicy: v1Resource("networking.k8s.io", "NetworkPolicy", true, "networkpolicies"),
  PodDisruptionBudget: v1Resource("policy", "PodDisruptionBudget", true),
  Lease: v1Resource("coordination.k8s.io", "Lease", true),
  CustomResourceDefinition: v1Resource("apiextensions.k8s.io", "CustomResourceDefinition", false),
  ClusterRole: v1Resource("rbac.authorization.k8s.io", "ClusterRole", false),
  ClusterRoleBinding: v1Resource("rbac.authorization.k8s.io", "ClusterRoleBinding", false),
  Role: v1Resource("rbac.authorization.k8s.io", "Role", true),
  RoleBinding: v1Resource("rbac.authorization.k8s.io", "RoleBinding", true),
} as const;
