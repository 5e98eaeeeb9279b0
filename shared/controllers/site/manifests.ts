/**
 * Pure helpers for the objects Site components apply: owner references, node affinity, images,
 * RBAC selection, ConfigMap payload hashing, and the "already applied" comparison that lets a
 * steady-state pass skip the server-side apply.
 */

import type { KubeObject, OwnerReference } from "../../kube/index.ts";
import { canonicalJson, controllerRefTo, specHash } from "../../kube/index.ts";
import { deprecatedSiteLabelKey, type Site, siteLabelKey } from "./api.ts";

/** Kind of a CustomResourceDefinition in embedded manifests; components never apply it. */
export const crdKind = "CustomResourceDefinition";

/** Namespace baked into the embedded manifests; `retargetNamespace` rewrites it. */
export const buildDefaultNamespace = "kubefn-system";

/**
 * The controller reference per-Site objects carry to their Site, so the garbage collector removes
 * them when the Site goes (even while the operator is down) and intake maps their changes back.
 *
 * Caveats: `blockOwnerDeletion` is unset on purpose: setting it needs `update` on
 * `sites/finalizers`, which the operator lacks, and every apply of an owned object would be refused.
 */
export function siteOwnerReference(site: Pick<Site, "apiVersion" | "kind" | "metadata">): OwnerReference {
  return controllerRefTo(site as KubeObject);
}

/** Node affinity matching Nodes with either the canonical or the deprecated site label (an OR). */
export function siteNodeAffinity(siteName: string): Record<string, unknown> {
  const term = (key: string) => ({ matchExpressions: [{ key, operator: "In", values: [siteName] }] });
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [term(siteLabelKey), term(deprecatedSiteLabelKey)],
      },
    },
  };
}

/**
 * Sets every init and main container image of a workload (Deployment, DaemonSet, StatefulSet:
 * `spec.template.spec`; Pod: `spec`), in place.
 *
 * @throws TypeError when the object has no pod spec.
 */
export function setPodSpecImages(obj: KubeObject, image: string): void {
  const spec = obj.spec as { template?: { spec?: unknown }; containers?: unknown } | undefined;
  const podSpec = (obj.kind === "Pod" ? spec : spec?.template?.spec) as
    | { containers?: { image?: string }[]; initContainers?: { image?: string }[] }
    | undefined;
  if (!podSpec || !Array.isArray(podSpec.containers)) {
    throw new TypeError(`${obj.kind} ${obj.metadata.name ?? ""} has no pod spec`);
  }
  for (const container of [...podSpec.containers, ...(podSpec.initContainers ?? [])]) container.image = image;
}

const rbacKinds: ReadonlySet<string> = new Set([
  "ServiceAccount",
  "Role",
  "RoleBinding",
  "ClusterRole",
  "ClusterRoleBinding",
]);

/**
 * Whether `obj` is an RBAC object (ServiceAccount, Role, RoleBinding, ClusterRole,
 * ClusterRoleBinding) whose name contains `nameContains` — the one decision of which RBAC in a
 * shared manifest set belongs to a component, so the component that skips it and the one that
 * applies it cannot drift apart.
 */
export function isRBACObject(obj: KubeObject, nameContains: string): boolean {
  return rbacKinds.has(obj.kind) && (obj.metadata.name ?? "").includes(nameContains);
}

type ConfigMapPayload = Pick<KubeObject, "metadata"> & {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
};

function payloadOf(config: ConfigMapPayload | undefined): { data: unknown; binaryData: unknown } {
  return { data: config?.data ?? {}, binaryData: config?.binaryData ?? {} };
}

/** Whether two ConfigMaps differ in payload (`data` and `binaryData`); metadata is ignored. */
export function configMapPayloadChanged(
  oldConfig: ConfigMapPayload | undefined,
  newConfig: ConfigMapPayload | undefined,
): boolean {
  return canonicalJson(payloadOf(oldConfig)) !== canonicalJson(payloadOf(newConfig));
}

/**
 * SHA-256 (hex) of the whole ConfigMap payload, over canonical JSON of `data` and `binaryData`:
 * stable across key order, and an absent map hashes like an empty one.
 */
export function configMapPayloadHash(config: ConfigMapPayload | undefined): Promise<string> {
  return specHash(payloadOf(config));
}

/**
 * Rewrites references to {@link buildDefaultNamespace} (the object's namespace and the subjects of
 * role bindings) to `namespace`, in place. A no-op in the default install.
 */
export function retargetNamespaceOf(obj: KubeObject, namespace: string): void {
  if (namespace === buildDefaultNamespace) return;
  if (obj.metadata.namespace === buildDefaultNamespace) obj.metadata.namespace = namespace;
  if (Array.isArray(obj.subjects)) {
    for (const subject of obj.subjects as { namespace?: string }[]) {
      if (subject.namespace === buildDefaultNamespace) subject.namespace = namespace;
    }
  }
}

/**
 * The ConfigMap `name` from a component's manifests, retargeted to `namespace` (the seed's
 * `DefaultConfigMap`): the defaults a component starts its generated config from. Pure; returns a
 * private copy.
 *
 * @throws Error naming `component` when the manifests hold no such ConfigMap.
 */
export function defaultConfigMap(
  manifests: readonly KubeObject[],
  name: string,
  component: string,
  namespace: string,
): KubeObject & { data: Record<string, string> } {
  const found = manifests.find((o) => o.kind === "ConfigMap" && o.metadata.name === name);
  if (!found) throw new Error(`${component} manifests contain no ConfigMap ${name}`);
  const copy = structuredClone(found) as KubeObject & { data?: Record<string, string> };
  retargetNamespaceOf(copy, namespace);
  return { ...copy, data: copy.data ?? {} };
}
