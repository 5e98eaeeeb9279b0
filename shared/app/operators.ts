import { Hono } from "hono/tiny";
import {
  discoveryRoutes,
  proxyPhaseGaugeTask,
  sharedProxyListing,
} from "../controllers/proxy/discovery/index.ts";
import { probeShardTask, proxyController, proxyHealthTask } from "../controllers/proxy/index.ts";
import { leaseRoutes, leaseSweepTask } from "../controllers/proxy/leases/index.ts";
import { orphanSweepTask } from "../controllers/proxy/orphans/index.ts";
import {
  createGceProvider,
  createKubernetesProvider,
  type Provider,
  type ProvidersByName,
} from "../controllers/proxy/providers/index.ts";
import { defaultSiteRegistry, siteController } from "../controllers/site/index.ts";
import {
  defaultOperatorConfig,
  defaultSubPoolTimings,
  sharedLookSweepTask,
  subPoolController,
} from "../controllers/subpool/index.ts";
import type { ProbeAllowList, Prober } from "../health/index.ts";
import type { Kube, KubeObject } from "../kube/index.ts";
import type { Context, SweepTask } from "../runtime/index.ts";
import { createRegistry, type RefusedController, type Registry, startable } from "../runtime/index.ts";
import type { OperatorSettings } from "./operator-settings.ts";

/** What every platform runs: the registry, the sweep's periodic tasks, and extra HTTP routes. */
export interface Operators {
  registry: Registry;
  sweepTasks: SweepTask[];
  /** Routes mounted beside the intake (discovery, leases). */
  routes?: (ctx: Context) => Hono;
  /**
   * Operators whose definition a setting made invalid: each runs as a stand-in that says so on its
   * primaries' Ready, and the others run on (see {@link startable}).
   */
  refused?: readonly RefusedController[];
}

export interface OperatorOptions {
  prober: Prober;
  /** How often the platform runs the sweep (the cron period). */
  sweepPeriodSeconds: number;
  probeConcurrency?: number;
  /** Probes in flight per namespace (per instance); half of `probeConcurrency` when unset. */
  probeNamespaceConcurrency?: number;
  /** Whose the probe slots are: the instance's (default) or each invocation's (`proxyHealthTask`'s `slotScope`). */
  probeSlotScope?: "instance" | "invocation";
  /** Fan health probes out through the queue in shards of this many Proxies (unset: probe in the sweep). */
  probeShardSize?: number;
  /** Providers beyond the built-in Kubernetes pod provider (e.g. "gce"). */
  providers?: (kube: Kube) => ProvidersByName;
  /** Drift poll (resync) of Proxies, seconds. */
  proxyResyncSeconds?: number;
  /** Least time between two status-affecting health reports of one Proxy. */
  minReportIntervalSeconds?: number;
  /** Bearer token for the crawler API (`/v1/proxies`, `/v1/leases`); the API is off without it. */
  apiToken?: string;
  /** How old an untracked provider instance must be before the orphan collector deletes it. */
  orphanGraceSeconds?: number;
  /**
   * The operators' own settings (SubPool's operator configuration, the Site components' config and
   * namespace, the GCE provider), parsed once by the adapter; defaults when absent.
   */
  settings?: OperatorSettings;
  /** Site component manifests read from a directory (Node host only); the embedded bundle otherwise. */
  siteManifests?: readonly KubeObject[];
  /**
   * Loopback, private and link-local destinations probes and External endpoints may name;
   * `settings.proxy.probeAllowList` (`PROBE_ALLOWED_CIDRS`) when unset, else none.
   */
  probeAllowList?: ProbeAllowList;
  /** Overrides the `fetch` of providers that call out (GCE); tests only. */
  fetch?: typeof fetch;
}

const defaultSiteConfig = {
  imageRegistry: "ghcr.io/unbounded-cloud",
  imageTag: "latest",
  apiServerEndpoint: "https://kubernetes.default.svc",
};

/**
 * The operators kubefn runs, assembled once per platform instance: the proxy operator (seed 000),
 * SubPool (seed 003) and the Site component registry (seed 004). Everything here is built
 * from parameters; nothing is read from the environment.
 */
export function createOperators(opts: OperatorOptions): Operators {
  // Built once: its token source caches the access token across passes.
  const gce = gceProvider(opts.settings?.gce, opts.fetch);
  const providersFor = (kube: Kube): ProvidersByName => ({
    kubernetes: createKubernetesProvider({ kube }),
    ...(gce ? { gce } : {}),
    ...opts.providers?.(kube),
  });
  const probeAllowList = opts.probeAllowList ?? opts.settings?.proxy.probeAllowList;
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
  // Each operator is built and validated alone: a setting that makes one definition invalid stops
  // that operator only, with a condition on its primaries, never another's start.
  const refused: RefusedController[] = [];
  const registry = createRegistry([
    startable(
      "proxy",
      () =>
        proxyController({
          providers: (ctx) => providersFor(ctx.kube),
          jobs: { [probeShardTask]: health.handleShard },
          ...(opts.settings ? { instanceAllowList: opts.settings.proxy.instanceAllowList } : {}),
          ...(probeAllowList ? { probeAllowList } : {}),
          ...(opts.proxyResyncSeconds ? { timings: { driftPoll: opts.proxyResyncSeconds } } : {}),
        }),
      refused,
    ),
    startable(
      "subpool",
      () =>
        subPoolController({
          ...(opts.settings ? { operatorConfig: opts.settings.subPool } : {}),
          ...(opts.settings?.subPoolRecheckSeconds
            ? { timings: { activeRequeue: opts.settings.subPoolRecheckSeconds } }
            : {}),
        }),
      refused,
      // SubPools say so as a bad SUBPOOL_* value does (Decision 1): InvalidOperatorConfig.
      (problems) => subPoolController({ operatorConfig: { invalid: problems.join("; ") } }),
    ),
    startable(
      "site",
      () =>
        siteController({
          registry: defaultSiteRegistry(opts.siteManifests ? { manifests: opts.siteManifests } : {}),
          env: opts.settings
            ? { config: opts.settings.site.config, namespace: opts.settings.site.namespace }
            : { config: defaultSiteConfig },
        }),
      refused,
    ),
  ]);
  return {
    registry,
    sweepTasks: [
      health,
      proxyPhaseGaugeTask(),
      leaseSweepTask(),
      // The seed's 30 s look at the shared Gateway and proxy gateway, for all pools together.
      ...sharedLook(opts.settings?.subPool ?? defaultOperatorConfig),
      {
        name: "proxy-orphans",
        controller: "proxy",
        // Providers are built per run from the sweep's own Kube, like the reconciler's.
        start: (ctx, memo) =>
          orphanSweepTask({
            providers: providersFor(ctx.kube),
            ...(opts.orphanGraceSeconds === undefined ? {} : { graceSeconds: opts.orphanGraceSeconds }),
          }).start(ctx, memo),
      },
    ],
    ...(opts.apiToken ? { routes: crawlerRoutes(opts.apiToken) } : {}),
    ...(refused.length > 0 ? { refused } : {}),
  };
}

/**
 * The seed's 30 s look at what no pool owns, half a drift period after each drift (none while the
 * SubPool settings are invalid: SubPools are not reconciled then).
 */
function sharedLook(config: OperatorSettings["subPool"]): SweepTask[] {
  if ("invalid" in config) return [];
  return [sharedLookSweepTask(config, Math.floor(defaultSubPoolTimings.resync / 2))];
}

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
  settings: OperatorSettings["gce"],
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
