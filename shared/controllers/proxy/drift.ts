/**
 * Proxy drift from the sweep's lists: each provider's instances listed once per drift period, each
 * distinct cloud-init Secret read once, and a pure comparison per Proxy.
 */
import { healthStateOf, projectHealth } from "../../health/index.ts";
import type { Condition, Kube, KubeObject } from "../../kube/index.ts";
import {
  type Context,
  canonicalJson,
  type DriftDeclaration,
  defineDrift,
  latchedAt,
  type PassContext,
  readinessDiffers,
  type SweepMemo,
} from "../../runtime/index.ts";
import {
  ProxyConditionType,
  ProxyMode,
  ProxyReason,
  type ProxyStatus,
  parseProxy,
  proxySpecHashAnnotation,
} from "./api.ts";
import { isCloudInitError, proxySpecHash, type ResolvedCloudInit, resolveCloudInit } from "./cloud-init.ts";
import { healthInstanceOf } from "./health-subject.ts";
import {
  type Instance,
  isNamespaceNotOptedIn,
  managedByTagKey,
  managedByTagValue,
  type Provider,
} from "./providers/index.ts";
import type { ProvidersSource } from "./reconcile.ts";
import { applyHealth, conditionOf, probeTimeoutCapped, proxyReadiness } from "./status.ts";

/** A namespace whose Pods and Secrets kubefn may not read (it did not opt in). */
export const notOptedIn = Symbol("not opted in");

/** What the sweep reads once per period for every Proxy's decision. */
export interface ProxyDriftShared {
  /**
   * A provider's instances (by id) a Proxy of `namespace` may own: every one the provider lists,
   * or, where kubefn reads tenant namespaces one at a time, that namespace's (listed once per
   * sweep). Undefined when the list failed (not judged); {@link notOptedIn} when RBAC refused it.
   */
  instancesIn(
    provider: string,
    namespace: string,
  ): Promise<ReadonlyMap<string, Instance> | undefined | typeof notOptedIn>;
  /** Provider names configured. */
  providers: ReadonlySet<string>;
  /** The desired spec hash of a Managed Proxy; each cloud-init Secret is read once per sweep. */
  desiredHash(
    namespace: string,
    spec: Parameters<typeof resolveCloudInit>[2] & Parameters<typeof proxySpecHash>[0],
  ): Promise<string>;
}

/**
 * The Proxy drift declaration: `load` lists every provider by the managed-by tag (one call per
 * provider per period; a namespaced provider refused the cluster-wide list is listed per namespace
 * of a swept Proxy, once each) and memoises cloud-init Secret reads; `decide` is
 * {@link proxyDriftReason}.
 */
export function proxyDrift(providers: ProvidersSource): DriftDeclaration {
  return defineDrift<ProxyDriftShared>({
    async load(ctx, memo) {
      const byName = typeof providers === "function" ? providers(sweepPassContext(ctx)) : providers;
      const listings = new Map<string, ProviderListing>();
      for (const [name, provider] of Object.entries(byName)) {
        try {
          listings.set(name, await providerInstances(memo, name, provider));
        } catch (err) {
          logListFailure(ctx, name, err);
        }
      }
      const byId = new Map<string, Promise<ReadonlyMap<string, Instance> | undefined | typeof notOptedIn>>();
      const instancesIn: ProxyDriftShared["instancesIn"] = (name, namespace) => {
        const listing = listings.get(name);
        if (!listing) return Promise.resolve(undefined);
        const key = listing.scope === "all" ? name : `${name}/${namespace}`;
        let found = byId.get(key);
        if (!found) {
          found = (async () => {
            const listed = listing.scope === "all" ? listing.instances : await listing.in(namespace);
            return listed === notOptedIn ? notOptedIn : new Map(listed.map((i) => [i.id, i]));
          })().catch((err: unknown) => {
            logListFailure(ctx, name, err);
            return undefined;
          });
          byId.set(key, found);
        }
        return found;
      };
      return { instancesIn, providers: new Set(Object.keys(byName)), desiredHash: memoisedHash(ctx.kube) };
    },
    decide: ({ primary, shared }) => proxyDriftReason(primary, shared),
  });
}

/**
 * Why this Proxy needs a pass, or undefined when its pass would change nothing: deletion, a new
 * generation, a retry that waits on time (quota, cloud-init), an instance gone or changed, a spec
 * hash moved (spec or cloud-init Secret), an address or health verdict the status does not show
 * yet. A finalizer not as the Proxy wants it is the runtime's reason (`finalizer`), asked first.
 *
 * Caveats: a Proxy the schema rejects is left to its next spec edit (its pass cannot fix it); a
 * latched Proxy (PermanentError at this generation) is quiet.
 */
export async function proxyDriftReason(
  primary: KubeObject,
  shared: ProxyDriftShared,
): Promise<string | undefined> {
  if (primary.metadata.deletionTimestamp) return "deleting";
  const parsed = parseProxy(primary);
  if (!parsed.success) return undefined;
  const proxy = parsed.data;
  const status = (primary.status ?? {}) as ProxyStatus & { observedGeneration?: number };
  const generation = primary.metadata.generation;
  if (status.observedGeneration !== generation) return "generation";
  if (
    latchedAt(status.conditions as Condition[] | undefined, ProxyConditionType.PermanentError, generation)
  ) {
    return undefined;
  }
  const capped = conditionOf(status, ProxyConditionType.ProbeTimeoutCapped)?.message;
  if (capped !== probeTimeoutCapped(proxy.spec.healthCheck)) return "probe-timeout";
  const provisioned = conditionOf(status, ProxyConditionType.Provisioned);

  if (proxy.spec.mode === ProxyMode.External) {
    if (status.ip !== proxy.spec.endpoint?.host) return "endpoint";
    if (provisioned?.status !== "True") return "provisioned";
    return (
      healthDrift(status, healthInstanceOf(proxy), proxy.spec.healthCheck !== undefined, generation) ??
      summaryDrift(primary)
    );
  }

  const providerName = proxy.spec.provider ?? "";
  if (!shared.providers.has(providerName)) return "provider";
  if (conditionOf(status, ProxyConditionType.QuotaExceeded)?.status === "True") return "quota-retry";
  // A cloud-init retry waits on its own follow-ups (with backoff): the sweep sends one only once
  // the Secret reads well, so that it does not restart the backoff while nothing changed. A
  // namespace that did not opt in is the same: a pass once it reads well, none while it does not.
  const retrying = provisioned?.reason === ProxyReason.CloudInitError;
  const waitsOnOptIn = provisioned?.reason === ProxyReason.NamespaceNotOptedIn;
  const namespace = primary.metadata.namespace ?? "";
  const instances = await shared.instancesIn(providerName, namespace);
  if (instances === notOptedIn) return waitsOnOptIn ? undefined : "namespace-not-opted-in";
  if (!retrying && !waitsOnOptIn) {
    if (!status.providerID) return "no-instance";
    if (instances) {
      const instance = instances.get(status.providerID);
      if (!instance) return "instance-gone";
      if (instance.state !== "Running" || !instance.ip) return "instance-state";
      if (status.ip !== instance.ip) return "instance-ip";
    }
    if (provisioned?.status !== "True") return "provisioned";
  }
  let desired: string;
  try {
    desired = await shared.desiredHash(namespace, proxy.spec);
  } catch (err) {
    if (isNamespaceNotOptedIn(err)) return waitsOnOptIn ? undefined : "namespace-not-opted-in";
    if (isCloudInitError(err)) return retrying ? undefined : "cloud-init";
    throw err;
  }
  if (waitsOnOptIn) return "namespace-opted-in";
  if (retrying) return "cloud-init-retry";
  if (primary.metadata.annotations?.[proxySpecHashAnnotation] !== desired) return "spec-hash";
  return (
    healthDrift(status, status.providerID, proxy.spec.healthCheck !== undefined, generation) ??
    summaryDrift(primary)
  );
}

/** Whether the summary (Ready, Reconciling, Stalled) is missing or says something else than the conditions. */
function summaryDrift(primary: KubeObject): string | undefined {
  const readiness = proxyReadiness(primary);
  return readiness && readinessDiffers(primary, readiness) ? "summary" : undefined;
}

/** Whether projecting `status.health` would change the status (pure; time only for stamps). */
function healthDrift(
  status: ProxyStatus & { health?: string },
  instance: string | undefined,
  healthChecked: boolean,
  generation: number | undefined,
): string | undefined {
  const projected = structuredClone(status);
  applyHealth(projected, projectHealth(healthStateOf(status), instance), healthChecked, {
    now: new Date(0),
    generation,
  });
  // Compared whatever the order of keys: the API server returns a status's fields sorted.
  return canonicalJson(projected) === canonicalJson(status) ? undefined : "health";
}

/**
 * A provider's kubefn-made instances: all of them, or (a namespaced provider kubefn may not list
 * across namespaces) a lister per namespace, {@link notOptedIn} where RBAC refuses.
 */
export type ProviderListing =
  | { scope: "all"; instances: Instance[] }
  | { scope: "namespaces"; in(namespace: string): Promise<Instance[] | typeof notOptedIn> };

/**
 * A provider's kubefn-made instances (by the managed-by tag), listed once per sweep for everyone
 * who asks (the drift decision and the orphan collector): one list across the provider's scope;
 * for a namespaced provider refused that (kubefn-tenant is bound per namespace, not
 * cluster-wide), one list per namespace asked for, each once per sweep.
 *
 * Caveats: per namespace, only namespaces with Proxies are listed, so an orphan left in a
 * namespace without any Proxy is collected only where kubefn-tenant is bound cluster-wide.
 */
export function providerInstances(
  memo: SweepMemo | undefined,
  name: string,
  provider: Provider,
): Promise<ProviderListing> {
  const tag = { key: managedByTagKey, value: managedByTagValue };
  const once = <T>(key: string, load: () => Promise<T>) => (memo ? memo.once(key, load) : load());
  return once(`proxy-instances/${name}`, async (): Promise<ProviderListing> => {
    try {
      return { scope: "all", instances: await provider.listByTag(tag) };
    } catch (err) {
      if (!provider.namespaced || !isNamespaceNotOptedIn(err)) throw err;
    }
    return {
      scope: "namespaces",
      in: (namespace) =>
        once(`proxy-instances/${name}/${namespace}`, () =>
          provider.listByTag(tag, { namespace }).catch((err: unknown) => {
            if (isNamespaceNotOptedIn(err)) return notOptedIn;
            throw err;
          }),
        ),
    };
  });
}

function logListFailure(ctx: Context, provider: string, err: unknown): void {
  ctx.log.error("sweep drift: listing instances failed", { provider, error: String(err) });
  ctx.metrics.count("kubefn_sweep_errors_total", { controller: "proxy", stage: `instances:${provider}` });
}

/** Each cloud-init Secret read once per sweep, whatever number of Proxies name it. */
function memoisedHash(kube: Kube): ProxyDriftShared["desiredHash"] {
  const resolved = new Map<string, Promise<ResolvedCloudInit>>();
  return async (namespace, spec) => {
    const ref = spec.cloudInit?.secretRef;
    const key = ref ? `${namespace}/${ref.name}/${ref.key ?? ""}` : undefined;
    let cloudInit: Promise<ResolvedCloudInit>;
    if (key === undefined) cloudInit = resolveCloudInit(kube, namespace, spec);
    else {
      cloudInit = resolved.get(key) ?? resolveCloudInit(kube, namespace, spec);
      resolved.set(key, cloudInit);
    }
    return proxySpecHash(spec, await cloudInit);
  };
}

/** Providers built per pass take a pass context; the sweep has none, so it lends its own. */
function sweepPassContext(ctx: Context): PassContext {
  return { ...ctx, request: { controller: "proxy", name: "" }, attempt: 0 };
}
