import { Hono } from "hono/tiny";
import type { Kube } from "../../kube/index.ts";
import { Resources } from "../../kube/index.ts";
import type { Context } from "../../runtime/index.ts";
import { defineOperator } from "../operator.ts";
import { proxyResource } from "./api.ts";
import { proxyController, proxyControllerName } from "./controller.ts";
import { discoveryRoutes, proxyPhaseGaugeTask, sharedProxyListing } from "./discovery/index.ts";
import { probeShardTask, proxyHealthTask } from "./health-task.ts";
import { leaseRoutes, leaseSweepTask } from "./leases/index.ts";
import { proxyMetricFamilies } from "./metrics.ts";
import { orphanSweepTask } from "./orphans/index.ts";
import {
  createGceProvider,
  createKubernetesProvider,
  type Provider,
  type ProvidersByName,
} from "./providers/index.ts";
import { type GceSettings, proxySettings } from "./settings.ts";

/**
 * The proxy operator (seed 000): Proxies, Managed (a provider's instance) or External; the health
 * sweep and its probe jobs, the orphan collector, and the crawler API (discovery and leases).
 */
export const proxyOperator = defineOperator({
  name: proxyControllerName,
  kinds: [proxyResource, Resources.Secret],
  crds: { module: "shared/controllers/proxy/crd.ts", exports: ["proxyCrd"] },
  settings: proxySettings,
  metricFamilies: proxyMetricFamilies,
  allowLists: {
    names: ["kubefn-proxy-images"],
    // The images of PROXY_ALLOWED_IMAGES, and PROXY_POD_IMAGE, which the pod provider runs.
    entries: (settings) => [
      ...settings.instanceAllowList.images.map((value, i) => ({
        list: "kubefn-proxy-images",
        key: `host-${i}`,
        value,
      })),
      ...(settings.podImage
        ? [{ list: "kubefn-proxy-images", key: "pod-image", value: settings.podImage }]
        : []),
    ],
  },
  build(settings, opts) {
    // Built once: its token source caches the access token across passes.
    const gce = gceProvider(settings?.gce, opts.fetch);
    const providersFor = (kube: Kube): ProvidersByName => ({
      kubernetes: createKubernetesProvider({
        kube,
        ...(settings?.podImage ? { defaultImage: settings.podImage } : {}),
      }),
      ...(gce ? { gce } : {}),
      ...opts.providers?.(kube),
    });
    const probeAllowList = opts.probeAllowList ?? settings?.probeAllowList;
    const health = proxyHealthTask({
      prober: opts.prober,
      ...(probeAllowList ? { allowList: probeAllowList } : {}),
      concurrency: opts.probeConcurrency ?? 32,
      ...(opts.probeNamespaceConcurrency ? { namespaceConcurrency: opts.probeNamespaceConcurrency } : {}),
      sweepPeriodSeconds: opts.sweepPeriodSeconds,
      ...(opts.minReportIntervalSeconds ? { minReportIntervalSeconds: opts.minReportIntervalSeconds } : {}),
      ...(opts.probeShardSize ? { fanOut: { shardSize: opts.probeShardSize } } : {}),
      ...(opts.probeSlotScope ? { slotScope: opts.probeSlotScope } : {}),
    });
    return {
      controller: () =>
        proxyController({
          providers: (ctx) => providersFor(ctx.kube),
          jobs: { [probeShardTask]: health.handleShard },
          ...(settings ? { instanceAllowList: settings.instanceAllowList } : {}),
          ...(probeAllowList ? { probeAllowList } : {}),
          ...(settings?.resyncSeconds ? { timings: { driftPoll: settings.resyncSeconds } } : {}),
        }),
      sweepTasks: [
        health,
        proxyPhaseGaugeTask(),
        leaseSweepTask(),
        {
          name: "proxy-orphans",
          controller: proxyControllerName,
          // Providers are built per run from the sweep's own Kube, like the reconciler's.
          start: (ctx, memo) =>
            orphanSweepTask({
              providers: providersFor(ctx.kube),
              ...(opts.orphanGraceSeconds === undefined ? {} : { graceSeconds: opts.orphanGraceSeconds }),
            }).start(ctx, memo),
        },
      ],
      ...(opts.apiToken ? { routes: crawlerRoutes(opts.apiToken) } : {}),
    };
  },
  cluster: {
    admissionPolicies: ["kubefn-pods-are-proxy-instances"],
    roles: [
      {
        kind: "ClusterRole",
        name: "kubefn-proxy",
        comment: `Proxy operator (seed 000). Proxies live in any tenant namespace, so its grants on Proxies and
Leases are cluster-wide; the admission policy limits its Lease writes to the ones it labelled.
What it reads and writes of a tenant namespace itself (Secrets, Pods) is kubefn-tenant below,
granted only where the namespace opted in.`,
        rules: [
          {
            comment: `get: the pass executor; list: sweep, discovery, the Secret → Proxy mapper, orphan and lease
sweeps; patch: finalizer, spec-hash and health annotations (guarded merge patches).`,
            apiGroups: ["crawl.kubefn.dev"],
            resources: ["proxies"],
            verbs: ["get", "list", "patch"],
          },
          { apiGroups: ["crawl.kubefn.dev"], resources: ["proxies/status"], verbs: ["patch"] },
          {
            comment: "Lease store for crawlers (one labelled Lease per leased proxy).",
            apiGroups: ["coordination.k8s.io"],
            resources: ["leases"],
            verbs: ["get", "list", "create", "update", "delete"],
          },
        ],
        bound: true,
      },
      {
        kind: "ClusterRole",
        name: "kubefn-tenant",
        comment: `What the Proxy operator needs inside a tenant namespace, bound there only when the namespace
opts in: no ClusterRoleBinding of it is installed, so a stolen kubefn token reads no Secret and
lists no Pod of a namespace that did not. The namespace's admin opts in with

  kubectl create rolebinding kubefn-tenant -n <namespace> --clusterrole=kubefn-tenant \\
    --serviceaccount=kubefn-system:kubefn

(the chart's tenantNamespaces binds it at install; clusterWideTenantAccess: true binds it
cluster-wide instead, the explicit choice of an install that trusts kubefn with every namespace).
A Proxy in a namespace that did not opt in reports Ready=False/NamespaceNotOptedIn with this
command, and converges within a drift period once the RoleBinding exists.`,
        rules: [
          {
            comment: `Cloud-init Secrets named by a Proxy are read by name only; no list, so kubefn cannot
enumerate Secret bodies.`,
            apiGroups: [""],
            resources: ["secrets"],
            verbs: ["get"],
          },
          {
            comment: `The pod provider: instances are Pods it creates, polls, lists by tag and deletes, and the
cloud-init Secret each instance mounts (created with the Pod, garbage-collected with it). The
admission policy limits these writes to Pods px-* and Secrets px-*-cloud-init it labelled.`,
            apiGroups: [""],
            resources: ["pods"],
            verbs: ["get", "list", "create", "delete"],
          },
          { apiGroups: [""], resources: ["secrets"], verbs: ["create", "delete"] },
        ],
        bound: false,
      },
    ],
    userRoles: [
      {
        kind: "ClusterRole",
        name: "kubefn-proxies-edit",
        comment: `Tenants: the built-in \`edit\` role (bound in a namespace) may manage Proxies there, and \`view\`
may read them. Neither may write proxies/status: the reconciler is its only writer.`,
        labels: {
          "rbac.authorization.k8s.io/aggregate-to-edit": "true",
          "rbac.authorization.k8s.io/aggregate-to-admin": "true",
        },
        rules: [
          {
            apiGroups: ["crawl.kubefn.dev"],
            resources: ["proxies"],
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
          },
        ],
        bound: false,
      },
      {
        kind: "ClusterRole",
        name: "kubefn-proxies-view",
        labels: { "rbac.authorization.k8s.io/aggregate-to-view": "true" },
        rules: [
          {
            apiGroups: ["crawl.kubefn.dev"],
            resources: ["proxies", "proxies/status"],
            verbs: ["get", "list", "watch"],
          },
        ],
        bound: false,
      },
    ],
    audit: [
      {
        comment: `Pods may carry cloud-init taken from a Secret (the pod provider passes it in the Pod's env),
and no controller owns Pods (instances are observed by polling), so no body: Metadata only.
The same for Leases (the crawler lease store writes them; nothing maps them).`,
        level: "Metadata",
        resources: [
          { group: "", resources: ["pods", "pods/status", "pods/binding", "pods/eviction"] },
          { group: "coordination.k8s.io", resources: ["leases"] },
        ],
      },
    ],
  },
});

/**
 * The crawler API: discovery and leases, sharing one read of the Proxies per few seconds for this
 * instance (`sharedProxyListing`): a burst of crawlers costs one list, not one per request.
 */
function crawlerRoutes(apiToken: string): (ctx: Context) => Hono {
  return (ctx) => {
    const app = new Hono();
    const listing = sharedProxyListing(ctx);
    app.route("/", discoveryRoutes(ctx, { apiToken, listing }));
    app.route("/", leaseRoutes(ctx, { apiToken, listing }));
    return app;
  };
}

function gceProvider(
  settings: GceSettings | undefined,
  fetchImpl: typeof fetch | undefined,
): Provider | undefined {
  if (!settings) return undefined;
  return createGceProvider({
    project: settings.project,
    zone: settings.zones[0]!,
    listZones: settings.zones,
    serviceAccountKey: settings.serviceAccountKey,
    ...(settings.computeUrl ? { baseUrl: settings.computeUrl } : {}),
    network: settings.network,
    ...(settings.subnetwork ? { subnetwork: settings.subnetwork } : {}),
    networkTags: settings.networkTags,
    ...(fetchImpl ? { fetch: fetchImpl } : {}),
  });
}
