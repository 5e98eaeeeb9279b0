import type { ProbeAllowList } from "../../health/index.ts";
import { type ControllerDefinition, done } from "../../runtime/index.ts";
import { defaultInstanceAllowList, type InstanceAllowList } from "./allow-list.ts";
import { ProxyConditionType, ProxyReason, proxyFinalizing, proxyResource } from "./api.ts";
import { proxyDrift } from "./drift.ts";
import { proxyErrorPolicy } from "./failure.ts";
import { forgetProxySeries } from "./probe-series.ts";
import { cleanupProxy, type ProvidersSource, type ProxyPassDeps, reconcileProxy } from "./reconcile.ts";
import { proxiesForSecret } from "./secret-watch.ts";
import { proxyStateChanges } from "./state-changes.ts";
import { proxyReadiness } from "./status.ts";
import { defaultProxyTimings, type ProxyTimings } from "./timings.ts";

export const proxyControllerName = "proxy";

export interface ProxyControllerDeps {
  /** Providers by the name `spec.provider` uses; a function builds them per pass from its context. */
  providers: ProvidersSource;
  timings?: Partial<ProxyTimings>;
  /** What a Managed Proxy may ask its instance to run; {@link defaultInstanceAllowList} when unset. */
  instanceAllowList?: InstanceAllowList;
  /**
   * Loopback, private and link-local addresses an External Proxy's endpoint may name
   * (`PROBE_ALLOWED_CIDRS`); none when unset (see shared/health/target.ts).
   */
  probeAllowList?: ProbeAllowList;
  /** Handlers of the sweep's fanned-out work (the probe shards of `proxyHealthTask`). */
  jobs?: ControllerDefinition["jobs"];
}

/**
 * The proxy operator as a kubefn controller: Managed proxies provisioned through a provider,
 * replaced when their spec or cloud-init changes, deleted behind the finalizer the runtime keeps
 * (`proxyFinalizing`: held by Managed proxies, cleanup deletes the instance); External proxies
 * taken as they are; health projected from the sweep's stored `status.health`.
 *
 * Watches Secrets (a rotated cloud-init Secret re-enqueues every Proxy naming it). Does not own
 * Pods: instances are observed by listing each provider once per drift period (`drift.ts`); a
 * Proxy gets a drift pass only when that list, its Secret or its stored health (`status.health`) says a pass
 * would change something. The resync is the drift period.
 *
 * Provider failures go through the error policy (failure.ts): QuotaExceeded and its retry, the
 * PermanentError latch at the current generation (phase Failed) that the executor honours.
 *
 * @example
 * const registry = createRegistry([
 *   proxyController({ providers: (ctx) => ({ kubernetes: createKubernetesProvider({ kube: ctx.kube }) }) }),
 * ]);
 */
export function proxyController(deps: ProxyControllerDeps): ControllerDefinition {
  const timings: ProxyTimings = { ...defaultProxyTimings, ...deps.timings };
  const resyncSeconds = Math.max(60, timings.driftPoll);
  const pass: ProxyPassDeps = {
    providers: deps.providers,
    timings,
    allowList: deps.instanceAllowList ?? defaultInstanceAllowList,
    ...(deps.probeAllowList ? { probeAllowList: deps.probeAllowList } : {}),
  };
  return {
    name: proxyControllerName,
    for: proxyResource,
    watches: [proxiesForSecret(proxyControllerName)],
    conditionTypes: Object.values(ProxyConditionType),
    conditionEvents: {
      conditions: {
        [ProxyConditionType.Provisioned]: "positive",
        [ProxyConditionType.Healthy]: "positive",
        [ProxyConditionType.QuotaExceeded]: "negative",
        [ProxyConditionType.PermanentError]: "negative",
        [ProxyConditionType.ProbeTimeoutCapped]: "negative",
      },
      progressReasons: [ProxyReason.Provisioning, ProxyReason.Replacing, ProxyReason.Deleting],
    },
    resyncSeconds,
    // The running state's drift poll is awaitSweep(). The quota retry is the error policy's; at
    // or beyond the resync it is the sweep's look (drift reason quota-retry).
    requeueSeconds: {
      provisioningPoll: timings.provisioningPoll,
      deletionPoll: timings.deletionPoll,
      requeueNow: timings.requeueNow,
    },
    errorPolicy: proxyErrorPolicy(timings.quotaRetry),
    readiness: proxyReadiness,
    stateChanges: proxyStateChanges,
    drift: proxyDrift(deps.providers),
    ...(deps.jobs ? { jobs: deps.jobs } : {}),
    finalizer: { ...proxyFinalizing, cleanup: (ctx, object) => cleanupProxy(ctx, object, pass) },
    reconcile: (ctx, object) => reconcileProxy(ctx, object, pass),
    // Gone (its finalizer removed, then deleted): its probe series go with it.
    reconcileAbsent: async (ctx) => {
      forgetProxySeries(ctx.metrics, ctx.request);
      return done();
    },
  };
}
