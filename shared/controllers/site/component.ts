/**
 * The component contract of the Site operator: a component is one unit of desired state reconciled
 * for Sites, publishing exactly one condition on every Site. Cluster components (net, machina) run
 * once per pass from the full set of Sites; Site components (metalman, storage) run per Site and
 * can be switched off. Adding a component means implementing one interface and registering it:
 * the pass, the conditions, their order and the Site-less pass are all driven from the registry.
 */
import { errorMessage } from "../../guards/index.ts";
import type { KubeObject, ObjectKey, Resource } from "../../kube/index.ts";
import type { Watch } from "../../runtime/index.ts";
import type { Site } from "./api.ts";
import { SiteReason } from "./api.ts";
import type { DesiredEnv, Env, WatchEnv } from "./env.ts";
import { summaryConditionTypes } from "./readiness.ts";

/** The sweep's listed object of a kind and key, or undefined when the lists do not hold it. */
export type ListedRead = (resource: Resource, key: ObjectKey) => KubeObject | undefined;

/**
 * The outcome of one component in one pass. The driver turns it into the component's Site
 * condition (`ready` → True/False, `reason`, `message`) and aggregates `err` into the pass error.
 *
 * A not-ready Result without `err` schedules nothing by itself: the driver retries on `err` (the
 * executor's backoff) or after the smallest positive `requeueAfterSeconds` of the pass; otherwise
 * the component runs again only when one of its watches fires (or the drift resync comes).
 * Build it with the named constructors.
 */
export interface Result {
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  readonly err?: unknown;
  /** When positive, run the Site again after this many seconds even without an event. */
  readonly requeueAfterSeconds?: number;
}

/** The component reached its desired state. */
export function reconciled(): Result {
  return { ready: true, reason: SiteReason.Reconciled, message: "component reconciled" };
}

/** The component is intentionally not running (ready: nothing is wrong). */
export function disabled(message: string): Result {
  return { ready: true, reason: SiteReason.Disabled, message };
}

/** A cluster component retained while no Sites exist. */
export function noSites(message: string): Result {
  return { ready: true, reason: SiteReason.NoSites, message };
}

/**
 * Not ready yet for `reason`, without an error. Caveats: schedules no retry; use
 * {@link notReadyAfter} when waiting on state no watch covers.
 */
export function notReady(reason: string, message: string): Result {
  return { ready: false, reason, message };
}

/** Not ready; re-check the Site after `seconds` (readiness that depends on unwatched state). */
export function notReadyAfter(reason: string, message: string, seconds: number): Result {
  return { ready: false, reason, message, requeueAfterSeconds: seconds };
}

/** The component failed: the error is the condition message and part of the pass error. */
export function failed(err: unknown): Result {
  return {
    ready: false,
    reason: SiteReason.ReconcileError,
    message: errorMessage(err),
    err,
  };
}

export const Result = { reconciled, disabled, noSites, notReady, notReadyAfter, failed } as const;

/** What every component has: a stable name and the one condition type it publishes. */
interface ComponentIdentity {
  /** Stable, unique identifier within a registry (e.g. "net"), used in logs and errors. */
  readonly name: string;
  /** The Site condition type this component publishes (e.g. "NetReady"); CamelCase, unique. */
  readonly conditionType: string;
  /**
   * Kinds whose changes should re-run this component (e.g. a per-Site config ConfigMap). The
   * controller merges watches of the same kind across components.
   */
  watches?(env: WatchEnv): Watch[];
  /**
   * Status writes of a workload this component reports on that carries no Site's controller
   * reference (a cluster component's shared Deployment): which Sites they bring a pass of, so
   * its condition follows the workload's readiness as an owned one's does (`readinessFrom`).
   */
  readinessWatches?(env: WatchEnv): Watch[];
  /**
   * The Deployment whose availability this component's condition reports, if any. The Site drift
   * decision reads it from the sweep's list: a True condition over a Deployment that no longer
   * runs is a reason for a pass (its status changes are no events).
   */
  workload?(env: DesiredEnv, site: Site): ObjectKey;
}

/**
 * A cluster-wide unit of desired state (net, machina). Runs once per pass with every live Site and
 * is never tied to one Site, so it also runs on the Site-less pass (a deleted Site, or the
 * singleton request `__singletons`).
 *
 * `reconcile` must be idempotent. Caveats: on the Site-less pass there is no status to publish, so
 * a not-ready Result matters there only through `err` or `requeueAfterSeconds`.
 */
export interface ClusterComponent extends ComponentIdentity {
  reconcile(env: Env, sites: readonly Site[]): Promise<Result>;
}

/**
 * A per-Site unit of desired state (metalman, storage). The driver runs `reconcile` when
 * `enabled(site)` and `cleanup` when not; a deleted Site's resources go through the garbage
 * collector (give them {@link siteOwnerReference}), not through `cleanup`.
 *
 * `reconcile` must be idempotent.
 */
export interface SiteComponent extends ComponentIdentity {
  enabled(site: Site): boolean;
  reconcile(env: Env, site: Site): Promise<Result>;
  /** Removes the component's per-Site resources; absent ones are fine. */
  cleanup(env: Env, site: Site): Promise<void>;
  /**
   * The Site an object of an owned kind belongs to, from its key alone (e.g. ConfigMap
   * `storage-<site>` in the operator namespace). Intake uses it for events without a body, where
   * the ownerReference cannot be read; without it such events wait for the drift resync.
   */
  siteFromKey?(resource: Resource, key: ObjectKey, namespace: string): string | undefined;
  /**
   * The per-Site objects `reconcile` applies for `site` (ConfigMaps and Deployments in the operator
   * namespace), computed from the sweep's lists instead of API reads. The Site drift decision
   * (`drift.ts`) compares them with what was listed, as `applyObject` compares them with a GET:
   * one missing, different, or left behind by a disabled component is a reason for a pass.
   * Without it the component's objects are caught by their events and the daily safety net.
   */
  desired?(env: DesiredEnv, site: Site, read: ListedRead): Promise<KubeObject[]>;
}

/**
 * The ordered components a Site controller drives. Conditions are published cluster-first, then
 * per-Site, each list in its order: that is the stable condition order on every Site.
 */
export interface Registry {
  readonly cluster: readonly ClusterComponent[];
  readonly site: readonly SiteComponent[];
}

/** A component registry that cannot run; `problems` lists every one found. */
export class ComponentRegistryError extends Error {
  override readonly name = "ComponentRegistryError";
  constructor(readonly problems: readonly string[]) {
    super(`invalid Site component registry: ${problems.join("; ")}`);
  }
}

const CAMEL_CASE = /^[A-Z][A-Za-z0-9]*$/;

/**
 * Rejects an empty registry, an empty name, a condition type that is not CamelCase, and duplicate
 * names or condition types across both lists, and a condition type of the Site's summary (Ready,
 * Reconciling, Stalled) — so a misconfigured registry fails at start-up
 * instead of silently dropping or double-publishing a condition.
 *
 * @throws ComponentRegistryError naming every problem.
 */
export function validateRegistry(registry: Registry): void {
  const problems: string[] = [];
  const all: ComponentIdentity[] = [...registry.cluster, ...registry.site];
  if (all.length === 0) problems.push("no components registered");
  const names = new Set<string>();
  const types = new Map<string, string>();
  for (const component of all) {
    if (!component.name) {
      problems.push("a component has an empty name");
    } else if (names.has(component.name)) {
      problems.push(`component name "${component.name}" is registered twice`);
    }
    names.add(component.name);
    if (!CAMEL_CASE.test(component.conditionType)) {
      problems.push(
        `component "${component.name}": condition type ${JSON.stringify(component.conditionType)} is not CamelCase`,
      );
      continue;
    }
    if (summaryConditionTypes.has(component.conditionType)) {
      problems.push(
        `component "${component.name}": condition type "${component.conditionType}" is the Site's summary`,
      );
      continue;
    }
    const holder = types.get(component.conditionType);
    if (holder !== undefined) {
      problems.push(
        `condition type "${component.conditionType}" is published by both "${holder}" and "${component.name}"`,
      );
    } else {
      types.set(component.conditionType, component.name);
    }
  }
  if (problems.length > 0) throw new ComponentRegistryError(problems);
}

/** Condition types in publishing order: cluster components first, then Site components. */
export function conditionOrder(registry: Registry): string[] {
  return [...registry.cluster, ...registry.site].map((c) => c.conditionType);
}
