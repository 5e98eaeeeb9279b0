import { type ObjectKey, type Resource, Resources } from "../../kube/index.ts";
import type { ControllerDefinition, DriftDeclaration } from "../../runtime/index.ts";
import { generationChanged } from "../../runtime/index.ts";
import {
  SubPoolConditionType,
  SubPoolReason,
  subPoolFinalizing,
  subPoolNamespacePrefix,
  subPoolResource,
} from "./api.ts";
import { defaultOperatorConfig, type InvalidOperatorConfig, type OperatorConfig } from "./config.ts";
import { cleanupSubPool } from "./deletion.ts";
import { subPoolObjectNames, subPoolOwnedResources } from "./desired.ts";
import { subPoolDrift } from "./drift.ts";
import { reconcileSubPool } from "./reconcile.ts";
import { sharedLookHandler, sharedLookTask } from "./shared-look.ts";
import { subPoolStateChanges } from "./state-changes.ts";
import { subPoolReadiness } from "./status.ts";
import { defaultSubPoolTimings, type SubPoolTimings } from "./timings.ts";

export const subPoolControllerName = "subpool";

export interface SubPoolControllerDeps {
  timings?: Partial<SubPoolTimings>;
  /**
   * The operator configuration, fixed for the life of the process; default
   * {@link defaultOperatorConfig}. An invalid one stops SubPools only (see {@link InvalidOperatorConfig}).
   */
  operatorConfig?: OperatorConfig | InvalidOperatorConfig;
  /** Field manager of writes to owned objects; default "kubefn-subpool". */
  fieldManager?: string;
  /** Random bytes for new credentials; default Web Crypto `getRandomValues`. */
  randomBytes?: (length: number) => Uint8Array;
}

/**
 * The SubPool operator as a kubefn controller: a cluster-scoped SubPool derives the Namespace
 * `subpool-<name>` and the objects inside it, validated before anything is created, never
 * adopting what someone else owns, suspended by scaling to zero, and deleted behind the finalizer
 * the runtime keeps (`subPoolFinalizing`), whose cleanup waits for the Namespace.
 *
 * Owns the derived kinds (events map back through the controller reference, or through the
 * `subpool-<name>` namespace when an audit event carries no body). The operator configuration is
 * a value fixed at construction (the seed's immutable configuration): no pass reads it and
 * nothing watches it. Active pools are looked at again at the sweep's one-minute drift pass (or
 * every `activeRequeue` seconds, when set shorter), since the shared Gateway and proxy gateway
 * are owned by nobody.
 *
 * Caveats: the HTTPRoute kind is not in `owns` (clusters without the Gateway API do not serve
 * it, and intake watching it would fail there); route changes are seen by the active requeue.
 *
 * @example
 * const registry = createRegistry([proxyController({ providers }), subPoolController()]);
 */
export function subPoolController(deps: SubPoolControllerDeps = {}): ControllerDefinition {
  const timings = effectiveTimings({ ...defaultSubPoolTimings, ...deps.timings });
  const passDeps = {
    timings,
    operatorConfig: deps.operatorConfig ?? defaultOperatorConfig,
    fieldManager: deps.fieldManager ?? "kubefn-subpool",
    randomBytes: deps.randomBytes ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n))),
    heldGateway: new Map(),
  };
  return {
    name: subPoolControllerName,
    for: subPoolResource,
    owns: subPoolOwnedResources,
    // The seed's Owns(StatefulSet) with no predicate: its status writes (ready replicas) bring a
    // look at the pool's readiness (reconcile.ts), mapped by the namespace subpool-<name>.
    readinessFrom: [Resources.StatefulSet],
    // The seed's predicate: create, delete, generation change; status- and label-only writes never.
    predicate: generationChanged,
    conditionTypes: Object.values(SubPoolConditionType),
    conditionEvents: {
      conditions: {
        [SubPoolConditionType.Ready]: "positive",
        [SubPoolConditionType.ProxyGatewayReady]: "positive",
        [SubPoolConditionType.RouteReady]: "positive",
        [SubPoolConditionType.Suspended]: "neutral",
        [SubPoolConditionType.AboveEnvelope]: "negative",
      },
      // Waiting for the StatefulSet's Pod or the Gateway's acceptance right after a change is
      // progress, not a problem, and a suspend is what the pool's owner asked for; a flip from
      // Ready to any of them is still recorded, as Normal.
      progressReasons: [
        SubPoolReason.StatefulSetNotReady,
        SubPoolReason.RouteNotReady,
        SubPoolReason.Suspended,
      ],
    },
    resyncSeconds: timings.resync,
    drift: "invalid" in passDeps.operatorConfig ? invalidConfigDrift : subPoolDrift(passDeps.operatorConfig),
    requeueSeconds: {
      deletionPoll: timings.deletionPoll,
      ...(timings.activeRequeue === undefined ? {} : { activeRequeue: timings.activeRequeue }),
      ...(timings.conflictRetry === undefined ? {} : { conflictRetry: timings.conflictRetry }),
    },
    ...("invalid" in passDeps.operatorConfig
      ? {}
      : { jobs: { [sharedLookTask]: sharedLookHandler(passDeps.operatorConfig) } }),
    ownerFromKey: subPoolFromKey,
    readiness: subPoolReadiness,
    finalizer: {
      ...subPoolFinalizing,
      // Seed step 1: nothing is written, the finalizer included, while the configuration is invalid.
      // Otherwise a new pool's first pass adds it before reading the pool: the patch answers the
      // pool as stored, one GET fewer a pool than the read before it (issue 33).
      ...("invalid" in passDeps.operatorConfig ? { want: () => "as-is" as const } : { addUnread: true }),
      cleanup: (ctx, object) => cleanupSubPool(ctx, object, timings),
    },
    stateChanges: subPoolStateChanges,
    reconcile: (ctx, object) => reconcileSubPool(ctx, object, passDeps),
  };
}

/**
 * The timings a pass uses: a look (`activeRequeue`, `conflictRetry`) not shorter than the resync
 * is the sweep's drift pass, which already looks at every pool at least that often, so it is left
 * unset rather than declared (the registry refuses a requeue it would never send).
 *
 * Regression: `SUBPOOL_RECHECK_SECONDS` from 60 up was declared as is, the registry refused the
 * SubPool definition, and every platform failed to start.
 */
export function effectiveTimings(timings: SubPoolTimings): SubPoolTimings {
  const resync = Math.max(60, timings.resync);
  const { activeRequeue, conflictRetry, ...rest } = timings;
  return {
    ...rest,
    resync,
    ...(activeRequeue !== undefined && activeRequeue < resync ? { activeRequeue } : {}),
    ...(conflictRetry !== undefined && conflictRetry < resync ? { conflictRetry } : {}),
  };
}

/** With an invalid operator configuration, a pool needs a pass only until its Ready says so. */
const invalidConfigDrift: DriftDeclaration = {
  decide: ({ primary }) => {
    const conditions = (primary.status as { conditions?: { type: string; reason?: string }[] } | undefined)
      ?.conditions;
    const ready = conditions?.find((c) => c.type === SubPoolConditionType.Ready);
    return ready?.reason === SubPoolReason.InvalidOperatorConfig ? undefined : "operator-config";
  },
};

/**
 * The SubPool that owns an object of an owned kind, from its key alone: Namespace
 * `subpool-<name>` itself, or an object inside it under the name the pool derives for its kind.
 *
 * Caveats: what the cluster itself puts in every new Namespace (the `kube-root-ca.crt`
 * ConfigMap, the `default` ServiceAccount) maps to nothing: it is no drift of the pool, and
 * mapping it cost every new pool a second pass right after its first.
 */
export function subPoolFromKey(resource: Resource, key: ObjectKey): ObjectKey | undefined {
  const namespace = resource.namespaced
    ? key.namespace
    : resource.kind === "Namespace"
      ? key.name
      : undefined;
  if (!namespace?.startsWith(subPoolNamespacePrefix)) return undefined;
  const name = namespace.slice(subPoolNamespacePrefix.length);
  if (name === "") return undefined;
  if (!resource.namespaced) return { name };
  const derived = derivedName[resource.kind];
  return derived && key.name === subPoolObjectNames(name)[derived] ? { name } : undefined;
}

/** Which of {@link subPoolObjectNames} a pool gives each owned namespaced kind. */
const derivedName: Record<string, keyof ReturnType<typeof subPoolObjectNames>> = {
  Secret: "credentials",
  ConfigMap: "config",
  ServiceAccount: "serviceAccount",
  Service: "service",
  StatefulSet: "statefulSet",
  ResourceQuota: "resourceQuota",
  NetworkPolicy: "networkPolicy",
  PodDisruptionBudget: "podDisruptionBudget",
};
