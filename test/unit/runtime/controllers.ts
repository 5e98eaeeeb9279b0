import { Resources } from "../../../shared/kube/resources.ts";
import type { Resource } from "../../../shared/runtime/core/index.ts";
import { type ControllerDefinition, done } from "../../../shared/runtime/index.ts";

/** Test doubles of the three seeds' controllers: their kinds and wiring, not their logic. */
export const ProxyResource: Resource = {
  group: "crawl.example.com",
  version: "v1alpha1",
  resource: "proxies",
  kind: "Proxy",
  namespaced: true,
};
export const SubPoolResource: Resource = {
  group: "subrelay.example.com",
  version: "v1alpha1",
  resource: "subpools",
  kind: "SubPool",
  namespaced: false,
};
export const SiteResource: Resource = {
  group: "unbounded-cloud.io",
  version: "v1alpha3",
  resource: "sites",
  kind: "Site",
  namespaced: false,
};
export const LeaseResource = Resources.Lease as Resource;
export const SINGLETON = "__singletons";

export function proxyController(overrides: Partial<ControllerDefinition> = {}): ControllerDefinition {
  return {
    name: "proxy",
    for: ProxyResource,
    // Like the real proxy controller: it owns no kind (its Pods are the provider's instances,
    // found by owner tag, not by an ownerReference the intake maps).
    watches: [
      {
        resource: Resources.Secret as Resource,
        async map(ctx, change) {
          if (!change.key.namespace) return [];
          const proxies = await ctx.kube.list(ProxyResource, { namespace: change.key.namespace });
          return proxies.items
            .filter((p) => {
              const spec = p.spec as { cloudInit?: { secretRef?: { name?: string } } } | undefined;
              return spec?.cloudInit?.secretRef?.name === change.key.name;
            })
            .map((p) => ({ controller: "proxy", namespace: p.metadata.namespace!, name: p.metadata.name! }));
        },
      },
    ],
    conditionTypes: ["Provisioned", "Healthy", "QuotaExceeded"],
    resyncSeconds: 600,
    reconcile: async () => done(),
    ...overrides,
  };
}

export function subPoolController(overrides: Partial<ControllerDefinition> = {}): ControllerDefinition {
  return {
    name: "subpool",
    for: SubPoolResource,
    owns: [Resources.Namespace as Resource, Resources.Secret as Resource, Resources.StatefulSet as Resource],
    conditionTypes: [
      "Ready",
      "NamespaceReady",
      "CredentialReady",
      "Suspended",
      "DeletionBlocked",
      "InvalidSpec",
    ],
    errorPolicy: { latch: { condition: "InvalidSpec" } },
    resyncSeconds: 1800,
    ownerFromKey: (_res, key) =>
      key.namespace?.startsWith("subpool-")
        ? { name: key.namespace.slice("subpool-".length) }
        : !key.namespace && key.name.startsWith("subpool-")
          ? { name: key.name.slice("subpool-".length) }
          : undefined,
    reconcile: async () => done(),
    ...overrides,
  };
}

export function siteController(overrides: Partial<ControllerDefinition> = {}): ControllerDefinition {
  return {
    name: "site",
    for: SiteResource,
    owns: [Resources.Deployment as Resource],
    watches: [
      {
        resource: Resources.ConfigMap as Resource,
        async map(ctx, change) {
          const name = change.key.name;
          if (name === "boom") throw new Error("mapper exploded");
          if (name.startsWith("site-config-") && name.length > "site-config-".length) {
            return [{ controller: "site", name: name.slice("site-config-".length) }];
          }
          if (name === "unbounded-config") {
            const sites = await ctx.kube.list(SiteResource);
            return [
              { controller: "site", name: SINGLETON },
              ...sites.items.map((s) => ({ controller: "site", name: s.metadata.name! })),
            ];
          }
          return [];
        },
      },
    ],
    conditionTypes: ["NetReady", "MachinaReady", "MetalmanReady", "StorageReady"],
    resyncSeconds: 300,
    reconcile: async () => done(),
    reconcileAbsent: async () => done(),
    ...overrides,
  };
}
