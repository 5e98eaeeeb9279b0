/**
 * SubPool drift from the sweep's lists: the pure question "would a pass change or learn
 * anything?", answered from one list per owned kind, the operator configuration and the shared
 * proxy gateway's EndpointSlices, all read once per drift period for every pool together.
 */
import {
  controllerOf,
  controllerRefTo,
  findCondition,
  formatLabelSelector,
  isControlledBy,
  isOwnedBy,
  type KubeObject,
  keyOf,
  mergeLabels,
  type Resource,
  Resources,
  upsertOwnerReference,
} from "../../kube/index.ts";
import {
  type DriftDeclaration,
  type DriftList,
  defineDrift,
  type Listed,
  readinessDiffers,
} from "../../runtime/index.ts";
import {
  ExposureMode,
  parseSubPool,
  SubPoolReason as Reason,
  type SubPoolStatus,
  subPoolManagedLabel,
  subPoolManagedValue,
  subPoolPoolLabel,
  SubPoolConditionType as Type,
} from "./api.ts";
import type { OperatorConfig } from "./config.ts";
import {
  desiredFor,
  gatewayResource,
  httpRouteResource,
  type ManagedObject,
  subPoolObjectNames,
  subPoolOwnedResources,
} from "./desired.ts";
import { namespaceOwnership } from "./ownership.ts";
import { aboveEnvelopeMessage, getOrUndefined, routeState } from "./reconcile.ts";
import { proxyGatewayOnce } from "./shared-look.ts";
import { type ReadinessObservation, readinessConditions, subPoolReadiness } from "./status.ts";
import { runningRequests, validateSubPool } from "./validate.ts";

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

const managedSelector = formatLabelSelector({ [subPoolManagedLabel]: subPoolManagedValue });

/** The list name of an owned kind (its plural). */
const listOf = (resource: Resource) => resource.resource;

/**
 * Kinds derived inside `subpool-<name>` whose full objects the decision compares: every owned
 * kind but the Namespace (listed by metadata below) and Secrets (never listed), and the HTTPRoute.
 */
const comparedKinds: Resource[] = [
  ...subPoolOwnedResources.filter((r) => r !== Resources.Namespace && r !== Resources.Secret),
  httpRouteResource,
];

/** Each list is made per page of pools, selected by `subrelay.example.com/pool in (<the page's pools>)`. */
const perPool = { label: subPoolPoolLabel, value: (pool: KubeObject) => pool.metadata.name };

/**
 * The lists, each per page of pools (so the sweep holds the derived objects of 500 pools at most,
 * never the fleet's): the pools' Namespaces by metadata only, each compared kind label-selected
 * on `app.kubernetes.io/managed-by=subpool-operator`, and legacy LimitRanges by metadata.
 *
 * Caveats: Secrets are not listed — kubefn may only `get` Secrets by name, never list them — so a
 * deleted credential Secret is found by its event or the safety net, not by the drift lists. An
 * object whose pool label was removed by hand is not listed: it reads as missing, and the pass
 * repairs (or reports) it. A foreign `subpool-<name>` Namespace carries none of our labels; see
 * {@link SubPoolDriftShared.namespaceExists}.
 */
export const subPoolDriftLists: readonly DriftList[] = [
  { name: listOf(Resources.Namespace), resource: Resources.Namespace, metadataOnly: true, perPage: perPool },
  ...comparedKinds.map((resource) => ({
    name: listOf(resource),
    resource,
    labelSelector: managedSelector,
    perPage: perPool,
  })),
  {
    name: listOf(Resources.LimitRange),
    resource: Resources.LimitRange,
    metadataOnly: true,
    perPage: perPool,
  },
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
    decide: ({ primary, listed, shared }) => subPoolDriftReason(primary, listed, shared),
    attach: ({ primary, listed }) => subPoolListedObjects(primary, listed),
  });
}

/**
 * The derived objects the sweep listed in full for this pool, by their fixed names: the pass's
 * first GET of each is served from them (the metadata-only Namespace is not attached).
 */
export function subPoolListedObjects(primary: KubeObject, listed: Listed): KubeObject[] {
  const id = primary.metadata.name ?? "";
  const names = subPoolObjectNames(id);
  const wanted: [Resource, string][] = [
    [Resources.ConfigMap, names.config],
    [Resources.ServiceAccount, names.serviceAccount],
    [Resources.Service, names.service],
    [Resources.StatefulSet, names.statefulSet],
    [Resources.ResourceQuota, names.resourceQuota],
    [Resources.NetworkPolicy, names.networkPolicy],
    [Resources.PodDisruptionBudget, names.podDisruptionBudget],
    [httpRouteResource, names.httpRoute],
  ];
  return wanted.flatMap(([resource, name]) => {
    const found = listed.get(listOf(resource), { namespace: names.namespace, name });
    return found ? [found] : [];
  });
}

/**
 * Why this SubPool needs a pass, or undefined when its pass would write nothing and learn nothing
 * (pure). Follows the pass's own order: deletion, schema, generation, configuration and
 * validation, Namespace, legacy LimitRange, each owned object, HTTPRoute, then the conditions the
 * listed objects imply against the ones in status. A finalizer not as the SubPool wants it is the
 * runtime's reason (`finalizer`), asked first.
 *
 * Caveats: a blocked pool (a conflict, an invalid spec) is quiet while its Ready condition already
 * says so; a credential conflict is re-checked every period (Secrets cannot be listed).
 */
export async function subPoolDriftReason(
  primary: KubeObject,
  listed: Listed,
  shared: SubPoolDriftShared,
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
  const names = subPoolObjectNames(pool.metadata.name ?? "");
  let validation = validateSubPool(pool, config);
  let aboveEnvelope: string | undefined;
  if (!validation.ok && validation.reason === Reason.ResourceEnvelopeExceeded) {
    // As the pass does: a pool above a lowered envelope is measured against what it runs.
    const running = listed.get(listOf(Resources.StatefulSet), {
      namespace: names.namespace,
      name: names.statefulSet,
    });
    if (running && isControlledBy(running, primary)) {
      const refusal = validation.message;
      validation = validateSubPool(pool, config, runningRequests(running));
      if (validation.ok) aboveEnvelope = aboveEnvelopeMessage(refusal);
    }
  }
  if (!validation.ok) return blockedBy(validation.reason, validation.message) ? undefined : "validation";
  const above = findCondition(status.conditions as never, Type.AboveEnvelope) as
    | { status: string; message?: string }
    | undefined;
  if ((above?.status === "True" ? above.message : undefined) !== aboveEnvelope) return "envelope";
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

  const legacy = listed.get(listOf(Resources.LimitRange), {
    namespace: nsName,
    name: subPoolObjectNames(pool.metadata.name ?? "").legacyLimitRange,
  });
  if (legacy && isControlledBy(legacy, primary)) return "legacy:LimitRange";

  let statefulSet: KubeObject | undefined;
  for (const managed of desired.managed) {
    const why = ownedDrift(primary, listed, managed, blockedBy(Reason.ManagedResourceConflict));
    if (why) return why;
    if (managed.resource === Resources.StatefulSet) {
      statefulSet = listed.get(listOf(Resources.StatefulSet), keyOf(managed.object));
    }
  }

  const gatewayMode = pool.spec.exposure.mode === ExposureMode.Gateway;
  const routes = listOf(httpRouteResource);
  let route: ReadinessObservation["route"];
  if (desired.httpRoute) {
    if (listed.available(routes)) {
      const why = ownedDrift(primary, listed, desired.httpRoute, blockedBy(Reason.ManagedResourceConflict));
      if (why) return why;
      const observed = listed.get(routes, keyOf(desired.httpRoute.object))!;
      const gatewayKey = validation.route!.gateway;
      route = routeState(observed, gatewayKey, await shared.gatewayObject(gatewayKey));
    } else {
      route = { state: "apiMissing", message: "" };
    }
  } else {
    const stale = listed.get(routes, {
      namespace: nsName,
      name: subPoolObjectNames(pool.metadata.name ?? "").httpRoute,
    });
    if (stale && isControlledBy(stale, primary)) return "stale:HTTPRoute";
    route = gatewayMode ? { state: "suspended" } : undefined;
  }

  const suspended = pool.spec.suspend;
  const sts = (statefulSet?.status ?? {}) as { readyReplicas?: number };
  const conditions = readinessConditions({
    suspended,
    statefulSet: { wanted: suspended ? 0 : 1, ready: sts.readyReplicas ?? 0 },
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
    if (
      want === null
        ? have !== undefined
        : !sameCondition(have, want, type === Type.RouteReady && route?.state === "apiMissing")
    )
      return `status:${type}`;
  }
  if (status.namespace !== nsName || status.cpaService !== desired.status.cpaService) return "status:fields";
  if ((status.hostname ?? undefined) !== desired.status.hostname) return "status:fields";
  return undefined;
}

/** Missing, foreign or changed, as `ensureObject` would find it; undefined when it would write nothing. */
function ownedDrift(
  pool: KubeObject,
  listed: Listed,
  managed: ManagedObject,
  conflictShown: boolean,
): string | undefined {
  const kind = managed.object.kind;
  const list = listOf(managed.resource);
  if (!listed.available(list)) return undefined;
  const observed = listed.get(list, keyOf(managed.object));
  if (!observed) return `missing:${kind}`;
  const controller = controllerOf(observed);
  const ownerRef = controllerRefTo(pool);
  if (controller ? controller.uid !== ownerRef.uid : !isOwnedBy(observed, pool)) {
    return conflictShown ? undefined : `conflict:${kind}`;
  }
  const desired = managed.object;
  if (mergeLabels(observed.metadata.labels, desired.metadata.labels).changed) return `changed:${kind}`;
  if (mergeLabels(observed.metadata.annotations, desired.metadata.annotations).changed)
    return `changed:${kind}`;
  if (upsertOwnerReference(observed.metadata.ownerReferences, ownerRef).changed) return `changed:${kind}`;
  if ((managed.ownedFields?.(observed, desired) ?? null) !== null) return `changed:${kind}`;
  return undefined;
}

function sameCondition(
  have: { status: string; reason: string; message?: string } | undefined,
  want: { status: string; reason: string; message: string },
  ignoreMessage: boolean,
): boolean {
  return (
    have !== undefined &&
    have.status === want.status &&
    have.reason === want.reason &&
    (ignoreMessage || (have.message ?? "") === want.message)
  );
}
