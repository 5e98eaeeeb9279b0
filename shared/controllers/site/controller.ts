import { errorMessage, isRecord } from "../../guards/index.ts";
import type { KubeObject, Resource } from "../../kube/index.ts";
import {
  type Condition,
  type ConditionInput,
  classifyError,
  ReconcileError,
  Resources,
  setCondition,
} from "../../kube/index.ts";
import type { Context, ControllerDefinition } from "../../runtime/index.ts";
import {
  done,
  failed,
  generationChanged,
  type Outcome,
  payloadChanged,
  requeueAfter,
} from "../../runtime/index.ts";
import * as z from "../../zod/index.ts";
import { parseSite, type Site, SiteReason, siteResource } from "./api.ts";
import {
  type ClusterComponent,
  conditionOrder,
  disabled,
  failed as failedResult,
  notReady,
  type Registry,
  type Result,
  type SiteComponent,
  validateRegistry,
} from "./component.ts";
import { siteDrift } from "./drift.ts";
import { createEnv, defaultEnvSettings, type Env } from "./env.ts";
import { siteReadiness } from "./readiness.ts";
import { siteStateChanges } from "./state-changes.ts";
import { type ComponentConfig, createWatchEnv, type EnvSettings, mergeWatches } from "./watches.ts";

export const siteControllerName = "site";

/** Drift period of Sites when none is given: how often the sweep lists their objects and decides (`drift.ts`). */
export const defaultSiteResyncSeconds = 300;

export interface SiteControllerOptions {
  registry: Registry;
  env: {
    config: ComponentConfig;
    /** Operator namespace; default kubefn-system. */
    namespace?: string;
    /** Server-side apply field manager; default "unbounded-operator" (the seed's). */
    fieldOwner?: string;
  };
  resyncSeconds?: number;
  /** Kinds the Site components create with a controller reference to the Site. */
  owns?: Resource[];
}

/** One component's Result in a pass, named. */
export interface ComponentResult {
  component: string;
  conditionType: string;
  result: Result;
}

/**
 * Every component's error in one pass. Classified (by the executor) through `cause`: the first
 * retryable error (transient, conflict, quota) if any — so one permanent failure does not stop
 * the retries another component needs. When every error is permanent-class the pass still backs
 * off, as the seed's driver does (its aggregated error goes to the work queue's exponential
 * backoff whatever its kind): the cause is then a transient error carrying the first one's reason,
 * and the executor retries with capped backoff instead of waiting for the drift resync — a
 * component's "permanent" answer (a 403 until RBAC is fixed, a 422 until a CRD is installed) is
 * often fixed outside the Site.
 */
export class SiteComponentsError extends Error {
  override readonly name = "SiteComponentsError";
  constructor(readonly failures: readonly { component: string; err: unknown }[]) {
    const message = failures.map((f) => `${f.component}: ${errorMessage(f.err)}`).join("; ");
    const retryable = failures.find((f) => classifyError(f.err).class !== "permanent");
    const first = failures[0] as { err: unknown };
    super(message, {
      cause:
        retryable?.err ??
        ReconcileError.transient(classifyError(first.err).reason, message, { cause: first.err }),
    });
  }
}

/**
 * What the pass asks for next, from its components' Results: any `err` → `failed` (aggregated,
 * the executor backs off); else the smallest positive `requeueAfterSeconds` → `requeueAfter`;
 * else `done`.
 */
export function outcomeOf(results: readonly ComponentResult[]): Outcome {
  const failures = results.flatMap((r) =>
    r.result.err === undefined ? [] : [{ component: r.component, err: r.result.err }],
  );
  if (failures.length > 0) return failed(new SiteComponentsError(failures));
  const delays = results
    .map((r) => r.result.requeueAfterSeconds ?? 0)
    .filter((s) => Number.isFinite(s) && s > 0);
  return delays.length > 0 ? requeueAfter(Math.min(...delays)) : done();
}

async function guarded(run: () => Promise<Result>): Promise<Result> {
  try {
    return await run();
  } catch (err) {
    return failedResult(err);
  }
}

/** Runs every cluster component with `sites`, in registry order. */
export async function reconcileClusterComponents(
  env: Env,
  components: readonly ClusterComponent[],
  sites: readonly Site[],
): Promise<ComponentResult[]> {
  const results: ComponentResult[] = [];
  for (const c of components) {
    results.push({
      component: c.name,
      conditionType: c.conditionType,
      result: await guarded(() => c.reconcile(env, sites)),
    });
  }
  return results;
}

/** Runs every Site component for `site`: reconcile when enabled, else cleanup and `Disabled`. */
export async function reconcileSiteComponents(
  env: Env,
  components: readonly SiteComponent[],
  site: Site,
): Promise<ComponentResult[]> {
  const results: ComponentResult[] = [];
  for (const c of components) {
    const result = await guarded(async () => {
      if (c.enabled(site)) return c.reconcile(env, site);
      await c.cleanup(env, site);
      return disabled(`${c.name} is disabled for this Site`);
    });
    results.push({ component: c.name, conditionType: c.conditionType, result });
  }
  return results;
}

/**
 * Sets one condition per component and orders them: the registry's types in registry order
 * first, then any others the Site carries (left alone). `lastTransitionTime` moves only on a flip.
 */
export function publishConditions(
  existing: readonly Condition[] | undefined,
  results: readonly ComponentResult[],
  order: readonly string[],
  now: Date,
  generation: number | undefined,
): Condition[] {
  let conditions = [...(existing ?? [])];
  for (const { conditionType, result } of results) {
    const input: ConditionInput = {
      type: conditionType,
      status: result.ready ? "True" : "False",
      reason: result.reason,
      message: result.message,
      ...(generation === undefined ? {} : { observedGeneration: generation }),
    };
    conditions = setCondition(conditions, input, now).conditions;
  }
  const rank = (type: string) => {
    const index = order.indexOf(type);
    return index === -1 ? order.length : index;
  };
  return conditions
    .map((c, index) => ({ c, index }))
    .sort((a, b) => rank(a.c.type) - rank(b.c.type) || a.index - b.index)
    .map(({ c }) => c);
}

const liveSites = (sites: readonly Site[]) => sites.filter((s) => !s.metadata.deletionTimestamp);

/**
 * The Site operator's component driver as a kubefn controller.
 *
 * A pass for a Site runs every cluster component (with all live Sites), then each Site component
 * (enabled → reconcile; disabled → cleanup and `Disabled`), and publishes one condition per
 * component in registry order (cluster first). Any component error fails the pass (the executor
 * backs off) while the conditions still record each failure; otherwise the smallest positive
 * `requeueAfterSeconds` decides the follow-up.
 *
 * `reconcileAbsent` serves a deleted Site and the singleton request `__singletons`: cluster
 * components only (the Site-less pass), no status. Per-Site objects of a deleted Site are left to
 * the garbage collector through their controller references.
 *
 * Caveats: a Site being deleted gets the Site-less pass (its components would recreate what the
 * garbage collector removes). Components apply through `Env.applyObject`, which reads before it
 * applies, so a converged pass makes no writes.
 *
 * @example
 * createRegistry([
 *   siteController({ registry: defaultSiteRegistry(), env: { config: { imageRegistry: "ghcr.io/unbounded", imageTag: "v0.1.24", apiServerEndpoint: "https://10.0.0.1:6443" } } }),
 * ]);
 */
export function siteController(options: SiteControllerOptions): ControllerDefinition {
  validateRegistry(options.registry);
  const { registry } = options;
  const settings: EnvSettings = {
    namespace: options.env.namespace ?? defaultEnvSettings.namespace,
    fieldOwner: options.env.fieldOwner ?? defaultEnvSettings.fieldOwner,
    controller: siteControllerName,
    config: options.env.config,
  };
  const watchEnv = createWatchEnv(settings);
  const order = conditionOrder(registry);

  /** The pass's Env; Sites failing the schema are logged and counted whenever Sites are listed. */
  const envFor = (ctx: Context) =>
    createEnv(ctx.kube, settings, (name, message) => {
      ctx.log.warn("Site fails the schema; cluster components run without it", {
        site: name,
        error: message,
      });
      ctx.metrics.count("kubefn_site_invalid_total", { site: name });
    });

  const siteless = async (env: Env): Promise<Outcome> => {
    const sites = liveSites(await env.listSites());
    return outcomeOf(await reconcileClusterComponents(env, registry.cluster, sites));
  };

  return {
    name: siteControllerName,
    for: siteResource,
    owns: options.owns ?? [Resources.ConfigMap, Resources.Deployment],
    // A component's Deployment becoming available (or losing it) is a status write: it brings a
    // pass of its Site (by its controller reference, or metalman-<site>), so MachinaReady and
    // MetalmanReady follow the rollout without waiting for the re-checks' backoff.
    // machina's, shared by every Site, carries no controller reference: its component maps it to
    // every Site (`readinessWatches`).
    ...((options.owns ?? [Resources.Deployment]).some((r) => r.kind === "Deployment")
      ? {
          readinessFrom: [Resources.Deployment],
          readinessWatches: mergeWatches(
            [...registry.cluster, ...registry.site].flatMap((c) => c.readinessWatches?.(watchEnv) ?? []),
          ),
        }
      : {}),
    // The seed's OwnedWorkloadPredicate (and ManagedConfigPredicate for owned configs): status
    // churn of an owned Deployment, label churn of an owned ConfigMap re-run nothing.
    ownedPredicate: (resource, change) =>
      resource.kind === "ConfigMap" ? payloadChanged(change) : generationChanged(change),
    watches: mergeWatches(
      [...registry.cluster, ...registry.site].flatMap((c) => c.watches?.(watchEnv) ?? []),
    ),
    conditionTypes: order,
    stateChanges: siteStateChanges(order),
    conditionEvents: {
      conditions: Object.fromEntries(order.map((type) => [type, "positive" as const])),
      // A Deployment rolling out is expected, not a warning; one past its deadline is.
      progressReasons: [SiteReason.DeploymentProgressing],
    },
    resyncSeconds: options.resyncSeconds ?? defaultSiteResyncSeconds,
    drift: siteDrift(registry, settings),
    async reconcile(ctx, object: KubeObject) {
      const env = envFor(ctx);
      if (object.metadata.deletionTimestamp) return siteless(env);
      const parsed = parseSite(object);
      if (!parsed.success) {
        // A Site the schema rejects will not pass on a retry: permanent until it is edited. It
        // says so on itself — every component condition False/InvalidSpec — not only in a log.
        const message = `Site ${object.metadata.name} fails the schema: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`;
        const status = (isRecord(object.status) ? object.status : {}) as { conditions?: Condition[] };
        status.conditions = publishConditions(
          status.conditions,
          order.map((conditionType) => ({
            component: conditionType,
            conditionType,
            result: notReady(SiteReason.InvalidSpec, message),
          })),
          order,
          ctx.clock.now(),
          object.metadata.generation,
        );
        object.status = status;
        return failed(ReconcileError.permanent(SiteReason.InvalidSpec, message));
      }
      const site = parsed.data;
      const sites = liveSites(await env.listSites());
      const results = [
        ...(await reconcileClusterComponents(env, registry.cluster, sites)),
        ...(await reconcileSiteComponents(env, registry.site, site)),
      ];
      const status = (object.status ?? {}) as { conditions?: Condition[] };
      status.conditions = publishConditions(
        status.conditions,
        results,
        order,
        ctx.clock.now(),
        object.metadata.generation,
      );
      object.status = status;
      return outcomeOf(results);
    },
    readiness: siteReadiness(order),
    reconcileAbsent: (ctx) => siteless(envFor(ctx)),
    ownerFromKey(resource, key) {
      for (const component of registry.site) {
        const site = component.siteFromKey?.(resource, key, settings.namespace);
        if (site !== undefined) return { name: site };
      }
      return undefined;
    },
  };
}
