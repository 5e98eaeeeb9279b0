/**
 * Proxy drift from the sweep's lists: each provider's instances listed once per drift period, each
 * distinct cloud-init Secret read once, and a pure comparison per Proxy.
 */
import { healthStateOf, projectHealth } from "../../health/index.ts";
import { type Condition, hasFinalizer, type Kube, type KubeObject } from "../../kube/index.ts";
import {
  type Context,
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
  proxyFinalizer,
  proxySpecHashAnnotation,
} from "./api.ts";
import { isCloudInitError, proxySpecHash, type ResolvedCloudInit, resolveCloudInit } from "./cloud-init.ts";
import { healthInstanceOf } from "./health-subject.ts";
import { type Instance, managedByTagKey, managedByTagValue, type Provider } from "./providers/index.ts";
import type { ProvidersSource } from "./reconcile.ts";
import { applyHealth, conditionOf, probeTimeoutCapped, proxyReadiness } from "./status.ts";

/** What the sweep reads once per period for every Proxy's decision. */
export interface ProxyDriftShared {
  /** Instances by provider, then by id; a provider whose list failed is absent (not judged). */
  instances: ReadonlyMap<string, ReadonlyMap<string, Instance>>;
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
 * provider per period) and memoises cloud-init Secret reads; `decide` is {@link proxyDriftReason}.
 */
export function proxyDrift(providers: ProvidersSource): DriftDeclaration {
  return defineDrift<ProxyDriftShared>({
    async load(ctx, memo) {
      const byName = typeof providers === "function" ? providers(sweepPassContext(ctx)) : providers;
      const instances = new Map<string, Map<string, Instance>>();
      for (const [name, provider] of Object.entries(byName)) {
        try {
          const listed = await providerInstances(memo, name, provider);
          instances.set(name, new Map(listed.map((i) => [i.id, i])));
        } catch (err) {
          ctx.log.error("sweep drift: listing instances failed", { provider: name, error: String(err) });
          ctx.metrics.count("kubefn_sweep_errors_total", { controller: "proxy", stage: `instances:${name}` });
        }
      }
      return { instances, providers: new Set(Object.keys(byName)), desiredHash: memoisedHash(ctx.kube) };
    },
    decide: ({ primary, shared }) => proxyDriftReason(primary, shared),
  });
}

/**
 * Why this Proxy needs a pass, or undefined when its pass would change nothing: deletion, a new
 * generation, a missing finalizer, a retry that waits on time (quota, cloud-init), an instance
 * gone or changed, a spec hash moved (spec or cloud-init Secret), an address or health verdict the
 * status does not show yet.
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

  if (!hasFinalizer(primary.metadata.finalizers, proxyFinalizer)) return "finalizer";
  const providerName = proxy.spec.provider ?? "";
  if (!shared.providers.has(providerName)) return "provider";
  if (conditionOf(status, ProxyConditionType.QuotaExceeded)?.status === "True") return "quota-retry";
  // A cloud-init retry waits on its own follow-ups (with backoff): the sweep sends one only once
  // the Secret reads well, so that it does not restart the backoff while nothing changed.
  const retrying = provisioned?.reason === ProxyReason.CloudInitError;
  if (!retrying) {
    if (!status.providerID) return "no-instance";
    const instances = shared.instances.get(providerName);
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
    desired = await shared.desiredHash(primary.metadata.namespace ?? "", proxy.spec);
  } catch (err) {
    if (isCloudInitError(err)) return retrying ? undefined : "cloud-init";
    throw err;
  }
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
  return JSON.stringify(projected) === JSON.stringify(status) ? undefined : "health";
}

/**
 * A provider's kubefn-made instances (by the managed-by tag), listed once per sweep for everyone
 * who asks (the drift decision and the orphan collector).
 */
export function providerInstances(
  memo: SweepMemo | undefined,
  name: string,
  provider: Provider,
): Promise<Instance[]> {
  const list = () => provider.listByTag({ key: managedByTagKey, value: managedByTagValue });
  return memo ? memo.once(`proxy-instances/${name}`, list) : list();
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
