import type { KubeObject } from "../../../kube/index.ts";
import { type Site, SiteConditionType, siteComponentEnabled, siteLabelKey } from "../api.ts";
import { failed, reconciled, type SiteComponent } from "../component.ts";
import type { DesiredEnv } from "../env.ts";
import { siteOwnerReference } from "../manifests.ts";
import { siteFromConfigName } from "../watches.ts";

/** The per-Site storage config: `storage-<site>` in the operator namespace, owned by the Site. */
export function storageConfigFor(env: DesiredEnv, site: Site): KubeObject {
  const name = site.metadata.name ?? "";
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `storage-${name}`,
      namespace: env.namespace,
      labels: { "app.kubernetes.io/name": "storage", [siteLabelKey]: name },
      ownerReferences: [siteOwnerReference(site)],
    },
    data: { site: name, "storage-class": "local-path", "volume-binding-mode": "WaitForFirstConsumer" },
  };
}

/**
 * storage: one ConfigMap per Site. Off when `spec.components.storage.enabled` is false: the
 * ConfigMap is deleted and the condition reads `Disabled`.
 */
export function storageComponent(): SiteComponent {
  return {
    name: "storage",
    conditionType: SiteConditionType.StorageReady,
    enabled: (site) => siteComponentEnabled(site, "storage"),
    async reconcile(env, site) {
      try {
        await env.applyObject(storageConfigFor(env, site));
      } catch (err) {
        return failed(err);
      }
      return reconciled();
    },
    async cleanup(env, site) {
      await env.deleteIfExists(storageConfigFor(env, site));
    },
    desired: async (env, site) => [storageConfigFor(env, site)],
    siteFromKey: (resource, key, namespace) =>
      resource.kind === "ConfigMap" && key.namespace === namespace
        ? siteFromConfigName("storage-", key.name)
        : undefined,
  };
}
