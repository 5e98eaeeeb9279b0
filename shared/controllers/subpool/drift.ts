/**
 * SubPool drift from the sweep's lists: the pure question "would a pass change or learn
 * anything?", answered from the SubPools, their Namespaces (metadata only), the operator
 * configuration and the shared state no pool owns (the proxy gateway's EndpointSlices, the
 * Gateways), all read once per drift period for every pool together.
 *
 * What a pool derives inside its Namespace is not listed: kubefn holds no right on those kinds
 * cluster-wide (grant.ts), and a list per pool's Namespace each period would cost every pool
 * requests while nothing changes. Their writes reach the pool as events instead — intake maps any
 * key in `subpool-<name>` to its pool (deleted, edited or, where the intake path carries status
 * writes, turned ready or not) — and the safety net's pass, once per pool a day, reads each of
 * them by name: the slow per-pool pass that finds what a lost event did not bring.
 */
import { findCondition, type KubeObject, type Resource, Resources } from "../../kube/index.ts";
import {
  type DriftDeclaration,
  type DriftList,
  defineDrift,
  dueThisSlot,
  type Listed,
  readinessDiffers,
} from "../../runtime/index.ts";
import {
  ExposureMode,
  parseSubPool,
  SubPoolReason as Reason,
  type SubPool,
  type SubPoolStatus,
  subPoolPoolLabel,
  SubPoolConditionType as Type,
} from "./api.ts";
import type { OperatorConfig } from "./config.ts";
import { desiredFor, gatewayResource } from "./desired.ts";
import { namespaceOwnership } from "./ownership.ts";
import { aboveEnvelopeMessage, getOrUndefined, routeState } from "./reconcile.ts";
import { proxyGatewayOnce } from "./shared-look.ts";
import { type ReadinessObservation, readinessConditions, subPoolReadiness } from "./status.ts";
import { type RunningRequests, runningRequests, validateSubPool } from "./validate.ts";

/** What the sweep reads once per period for every SubPool's decision. */
export interface SubPoolDriftShared {
  /** The operator configuration (fixed for the process). */
  config: OperatorConfig;
  /** The shared proxy gateway's readiness. */
  gateway: { ready: boolean; message: string };
  /** A Gateway by key, read once per sweep whatever number of pools route through it; null when absent. */
  gatewayObject(key: { name: string; namespace: string }): Promise<KubeObject | null>;
  /**
   * Whether a Namespace of this name exists (a GET, once per sweep per name): asked only for a pool
   * whose status already shows a NamespaceConflict, since the label-selected list cannot show a
   * foreign Namespace.
   */
  namespaceExists(name: string): Promise<boolean>;
}

/** The list name of an owned kind (its plural). */
const listOf = (resource: Resource) => resource.resource;

/** Each list is made per page of pools, selected by `subrelay.example.com/pool in (<the page's pools>)`. */
const perPool = { label: subPoolPoolLabel, value: (pool: KubeObject) => pool.metadata.name };

/**
 * The one list beside the SubPools: the pools' Namespaces by metadata only (no bodies kept in the
 * sweep), per page of pools (`subrelay.example.com/pool in (<the page's pools>)`), so the sweep
 * holds the Namespaces of one page, never the fleet's.
 *
 * Caveats: a foreign `subpool-<name>` Namespace carries none of our labels; see
 * {@link SubPoolDriftShared.namespaceExists}. Nothing inside the Namespaces is listed (see the
 * file's comment): a derived object deleted while its event was lost is found by the safety net.
 */
export const subPoolDriftLists: readonly DriftList[] = [
  { name: listOf(Resources.Namespace), resource: Resources.Namespace, metadataOnly: true, perPage: perPool },
];

/** The SubPool drift declaration for the controller, under the operator configuration `config`. */
export function subPoolDrift(config: OperatorConfig): DriftDeclaration {
  return defineDrift<SubPoolDriftShared>({
    lists: subPoolDriftLists,
    async load(ctx, memo) {
      const gateway = config.proxyGateway;
      return {
        config,
        // Memoised for the sweep: the shared look (shared-look.ts) reads the same list.
        gateway: await proxyGatewayOnce(ctx, memo, gateway),
        gatewayObject: (key) =>
          memo.once(
            `subpool:gateway:${key.namespace}/${key.name}`,
            async () => (await getOrUndefined(ctx, gatewayResource, key)) ?? null,
          ),
        namespaceExists: (name) =>
          memo.once(
            `subpool:namespace:${name}`,
            async () => (await getOrUndefined(ctx, Resources.Namespace, { name })) !== undefined,
          ),
      };
    },
    decide: ({ primary, listed, shared, now }) => subPoolDriftReason(primary, listed, shared, now),
  });
}

/**
 * Why this SubPool needs a pass, or undefined when its pass would write nothing and learn nothing
 * (pure). Follows the pass's own order: deletion, schema, generation, configuration and
 * validation, Namespace, then the conditions the shared state implies against the ones in status.
 * A finalizer not as the SubPool wants it is the runtime's reason (`finalizer`), asked first.
 *
 * What the pool's status says of its own objects (its StatefulSet's ready replicas, its route's
 * acceptance, the running requests admitted above a lowered envelope) is taken as the pass wrote
 * it — a change of those objects is an event of its own — and combined with what the sweep read
 * this period: the proxy gateway, the Gateway a route attaches to, whether the Gateway API is served.
 *
 * Caveats: a blocked pool (a conflict, an invalid spec) is quiet while its Ready condition already
 * says so; a credential conflict is re-checked every period (Secrets cannot be listed).
 */
export async function subPoolDriftReason(
  primary: KubeObject,
  listed: Listed,
  shared: SubPoolDriftShared,
  now: Date,
): Promise<string | undefined> {
  if (primary.metadata.deletionTimestamp) return "deleting";
  const status = (primary.status ?? {}) as SubPoolStatus & { observedGeneration?: number };
  const ready = findCondition(status.conditions as never, Type.Ready);
  const blockedBy = (reason: string, message?: string) =>
    ready?.status === "False" &&
    ready.reason === reason &&
    (message === undefined || ready.message === message);

  const parsed = parseSubPool(primary);
  if (!parsed.success) return blockedBy(Reason.InvalidSpec) ? undefined : "invalid-spec";
  if (status.observedGeneration !== primary.metadata.generation) return "generation";
  // A full pass, not an in-place one (`status:*`): the summary may be stale on a blocked pool.
  if (readinessDiffers(primary, subPoolReadiness(primary))) return "summary";
  const pool = parsed.data;
  const config = shared.config;
  let validation = validateSubPool(pool, config);
  const above = findCondition(status.conditions as never, Type.AboveEnvelope) as
    | { status: string; message?: string }
    | undefined;
  const aboveShown = above?.status === "True" ? above.message : undefined;
  let aboveEnvelope: string | undefined;
  if (!validation.ok && validation.reason === Reason.ResourceEnvelopeExceeded) {
    // The pass measured the pool against what its StatefulSet runs and said so on AboveEnvelope:
    // that holds while the envelope refuses the same (a change of the StatefulSet is an event).
    // Not shown yet: the pass measures it against what the StatefulSet runs (one GET there).
    const refusal = aboveEnvelopeMessage(validation.message);
    if (aboveShown === refusal) {
      validation = validateSubPool(pool, config, runningRequestsOf(pool));
      if (validation.ok) aboveEnvelope = refusal;
    } else if (!blockedBy(validation.reason, validation.message)) {
      return "envelope";
    }
  }
  if (!validation.ok) return blockedBy(validation.reason, validation.message) ? undefined : "validation";
  if (aboveShown !== aboveEnvelope) return "envelope";
  const desired = desiredFor(pool, config, validation);
  const nsName = desired.status.namespace;

  if (!listed.available(listOf(Resources.Namespace))) return undefined;
  const namespace = listed.get(listOf(Resources.Namespace), { name: nsName });
  const ownership = namespaceOwnership(namespace, primary);
  if (ownership === "foreign") return blockedBy(Reason.NamespaceConflict) ? undefined : "conflict:Namespace";
  if (ownership === "absent") {
    // The list shows only labelled Namespaces: a conflict already reported is quiet while the
    // foreign Namespace still exists, and a pass is sent once it is gone.
    if (blockedBy(Reason.NamespaceConflict) && (await shared.namespaceExists(nsName))) return undefined;
    return "missing:Namespace";
  }
  if (namespace?.metadata.deletionTimestamp) return "namespace-terminating";
  if (blockedBy(Reason.CredentialConflict)) return "conflict:Secret";
  // A conflict on a derived object is the pass's to re-check, with the object's event.
  if (blockedBy(Reason.ManagedResourceConflict)) return undefined;

  const suspended = pool.spec.suspend;
  const routeShown = findCondition(status.conditions as never, Type.RouteReady) as
    | { status: string; reason: string; message?: string }
    | undefined;
  let route: ReadinessObservation["route"];
  if (desired.httpRoute) {
    const gatewayKey = validation.route!.gateway;
    const gateway = await shared.gatewayObject(gatewayKey);
    route = routeAsShown(routeShown, gatewayKey, gateway);
    if (route === undefined) return "status:RouteReady";
  } else {
    route = pool.spec.exposure.mode === ExposureMode.Gateway ? { state: "suspended" } : undefined;
  }
  const conditions = readinessConditions({
    suspended,
    statefulSet: { wanted: suspended ? 0 : 1, ready: suspended ? 0 : readyReplicasShown(ready) },
    proxyGateway: suspended ? undefined : shared.gateway,
    route,
  });
  const expected: [string, { status: string; reason: string; message: string } | null][] = [
    [Type.Ready, conditions.ready],
    [Type.ProxyGatewayReady, conditions.proxyGateway],
    [Type.RouteReady, conditions.route],
    [Type.Suspended, conditions.suspended],
  ];
  for (const [type, want] of expected) {
    const have = findCondition(status.conditions as never, type);
    if (want === null ? have !== undefined : !sameCondition(have, want)) return `status:${type}`;
  }
  if (status.namespace !== nsName || status.cpaService !== desired.status.cpaService) return "status:fields";
  if ((status.hostname ?? undefined) !== desired.status.hostname) return "status:fields";
  if (!suspended && ready && waitsOnItsOwn.has(ready.reason) && waitingLookDue(primary, ready, now))
    return `waiting:${ready.reason}`;
  return undefined;
}

/**
 * Ready's reasons while an active pool waits on a status write of its own objects (its
 * StatefulSet's ready replicas, its route's acceptance), which no list shows the sweep.
 */
const waitsOnItsOwn: ReadonlySet<string> = new Set([Reason.StatefulSetNotReady, Reason.RouteNotReady]);

/** The longest a pool waiting on its StatefulSet goes unlooked at by the sweep, seconds. */
export const longestWaitingLook = 3600;

/**
 * Whether the sweep looks again at a pool whose Ready has waited on its own StatefulSet (or route)
 * since `ready.lastTransitionTime` (pure): their readiness is a status write, which reaches intake as an
 * event only where the intake path carries status writes (and an event may be lost), and the
 * pass's own waiting looks end after about a minute (timings.ts). From then on, once per half the time waited — a window
 * of 1, 2, 4, … minutes, capped at {@link longestWaitingLook}, each pool in its slot of the window
 * by UID — so a pool becoming ready late is seen at most about half its wait late, and one that
 * never does costs a pass an hour, not one a minute.
 *
 * Caveats: windows are counted in minute slots (the sweep's default period); a sweep every 10 s
 * (`npm start`) sees a slot several times, and the Node host's queue merges the repeats.
 */
export function waitingLookDue(
  primary: KubeObject,
  ready: { lastTransitionTime?: string },
  now: Date,
): boolean {
  const since = Date.parse(ready.lastTransitionTime ?? "");
  if (!Number.isFinite(since)) return false;
  const waited = (now.getTime() - since) / 1000;
  if (waited < 180) return false;
  const window = Math.min(longestWaitingLook, 60 * 2 ** Math.floor(Math.log2(waited / 120)));
  return dueThisSlot(primary, now, window, 60);
}

/**
 * The StatefulSet's ready replicas as the pass last saw them (pure): what Ready says when it waits
 * for them (`StatefulSet has N/1 ready replicas`), else the one replica wanted.
 */
function readyReplicasShown(ready: { status: string; reason: string; message?: string } | undefined): number {
  if (ready?.status !== "False" || ready.reason !== Reason.StatefulSetNotReady) return 1;
  const shown = /\bhas (\d+)\//.exec(ready.message ?? "");
  return shown ? Number(shown[1]) : 0;
}

/**
 * The requests a pool admitted above a lowered envelope runs with, as its spec asks them (pure):
 * the pass admitted the spec by what its StatefulSet ran, and the StatefulSet runs the spec.
 */
function runningRequestsOf(pool: SubPool): RunningRequests {
  return runningRequests({
    spec: { template: { spec: { containers: [pool.spec.cpa, pool.spec.cpaManager] } } },
  });
}

/**
 * The route's state as the pass last saw it, with the Gateway as read this sweep (pure): a route
 * the Gateway had accepted is judged against the Gateway now (gone, or no longer Programmed); one
 * the Gateway had not accepted stays as shown (its acceptance is the route's own status write);
 * one refused for want of the Gateway API is looked at again once a Gateway is served. Undefined
 * when the status shows no route condition a pass would have written.
 */
function routeAsShown(
  shown: { status: string; reason: string; message?: string } | undefined,
  gatewayKey: { name: string; namespace: string },
  gateway: KubeObject | null,
): ReadinessObservation["route"] {
  if (!shown) return undefined;
  const where = `Gateway ${gatewayKey.namespace}/${gatewayKey.name}`;
  const message = shown.message ?? "";
  const acceptedBefore =
    shown.reason === Reason.Accepted ||
    (shown.reason === Reason.RouteNotReady &&
      (message === `${where} does not exist` ||
        message.startsWith(`accepted by ${where}, which is not ready`)));
  if (acceptedBefore) return routeState(acceptedRoute(gatewayKey), gatewayKey, gateway);
  if (shown.reason === Reason.GatewayAPIMissing) {
    return gateway === null ? { state: "apiMissing", message } : undefined;
  }
  if (shown.reason === Reason.RouteNotReady) return { state: "pending", message };
  return undefined;
}

/** A route whose status says `gateway` accepted it: what routeState judges the Gateway by. */
function acceptedRoute(gateway: { name: string; namespace: string }): KubeObject {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "HTTPRoute",
    metadata: { namespace: gateway.namespace },
    status: { parents: [{ parentRef: gateway, conditions: [{ type: "Accepted", status: "True" }] }] },
  };
}

function sameCondition(
  have: { status: string; reason: string; message?: string } | undefined,
  want: { status: string; reason: string; message: string },
): boolean {
  return (
    have !== undefined &&
    have.status === want.status &&
    have.reason === want.reason &&
    (have.message ?? "") === want.message
  );
}
