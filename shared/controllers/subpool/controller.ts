import { listAll } from "../../kube/list.ts";
import type { ObjectKey, Resource } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import type { ControllerDefinition, Watch } from "../../runtime/controller.ts";
import type { Request } from "../../runtime/types.ts";
import { SubPoolConditionType, subPoolNamespacePrefix, subPoolResource } from "./api.ts";
import { defaultOperatorConfigKey } from "./config.ts";
import { reconcileSubPool } from "./reconcile.ts";
import { defaultSubPoolTimings, type SubPoolTimings } from "./timings.ts";

export const subPoolControllerName = "subpool";

export interface SubPoolControllerDeps {
  timings?: Partial<SubPoolTimings>;
  /** The operator configuration ConfigMap; default `kubefn-system/subpool-operator-config`. */
  operatorConfig?: Required<ObjectKey>;
  /** Field manager of writes to owned objects; default "kubefn-subpool". */
  fieldManager?: string;
  /** Random bytes for new credentials; default Web Crypto `getRandomValues`. */
  randomBytes?: (length: number) => Uint8Array;
}

/** The kinds a SubPool derives and controls; their events map back through the controller ref. */
export const subPoolOwnedResources: Resource[] = [
  Resources.Namespace,
  Resources.Secret,
  Resources.ConfigMap,
  Resources.ServiceAccount,
  Resources.Service,
  Resources.StatefulSet,
  Resources.ResourceQuota,
  Resources.NetworkPolicy,
  Resources.PodDisruptionBudget,
];

/**
 * The SubPool operator as a kubefn controller: a cluster-scoped SubPool derives the Namespace
 * `subpool-<name>` and the objects inside it, validated before anything is created, never
 * adopting what someone else owns, suspended by scaling to zero, and deleted behind a finalizer
 * that waits for the Namespace.
 *
 * Owns the derived kinds (events map back through the controller reference, or through the
 * `subpool-<name>` namespace when an audit event carries no body); watches the operator
 * configuration ConfigMap (a change re-enqueues every SubPool). Active pools are looked at again
 * every `activeRequeue` seconds, since the shared Gateway and proxy gateway are owned by nobody;
 * by default that is the one-minute resync, i.e. the sweep's drift pass.
 *
 * Caveats: the HTTPRoute kind is not in `owns` (clusters without the Gateway API do not serve
 * it, and intake watching it would fail there); route changes are seen by the active requeue.
 *
 * @example
 * const registry = createRegistry([proxyController({ providers }), subPoolController()]);
 */
export function subPoolController(deps: SubPoolControllerDeps = {}): ControllerDefinition {
  const timings: SubPoolTimings = { ...defaultSubPoolTimings, ...deps.timings };
  const configKey = deps.operatorConfig ?? defaultOperatorConfigKey;
  const passDeps = {
    timings,
    configKey,
    fieldManager: deps.fieldManager ?? "kubefn-subpool",
    randomBytes: deps.randomBytes ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n))),
  };
  return {
    name: subPoolControllerName,
    for: subPoolResource,
    owns: subPoolOwnedResources,
    watches: [subPoolsForOperatorConfig(subPoolControllerName, configKey)],
    conditionTypes: Object.values(SubPoolConditionType),
    conditionEvents: {
      conditions: {
        [SubPoolConditionType.Ready]: "positive",
        [SubPoolConditionType.ProxyGatewayReady]: "positive",
        [SubPoolConditionType.RouteReady]: "positive",
        [SubPoolConditionType.Suspended]: "neutral",
      },
    },
    resyncSeconds: Math.max(60, timings.resync),
    ownerFromKey: subPoolFromKey,
    reconcile: (ctx, object) => reconcileSubPool(ctx, object, passDeps),
  };
}

/**
 * The SubPool that owns an object of an owned kind, from its key alone: Namespace
 * `subpool-<name>` itself, or anything inside it.
 */
export function subPoolFromKey(resource: Resource, key: ObjectKey): ObjectKey | undefined {
  const namespace = resource.namespaced
    ? key.namespace
    : resource.kind === "Namespace"
      ? key.name
      : undefined;
  if (!namespace?.startsWith(subPoolNamespacePrefix)) return undefined;
  const name = namespace.slice(subPoolNamespacePrefix.length);
  return name === "" ? undefined : { name };
}

/** The operator configuration ConfigMap → every SubPool; any other ConfigMap → nothing. */
export function subPoolsForOperatorConfig(controller: string, configKey: Required<ObjectKey>): Watch {
  return {
    resource: Resources.ConfigMap,
    async map(ctx, change) {
      if (change.key.namespace !== configKey.namespace || change.key.name !== configKey.name) return [];
      const pools = await listAll(ctx.kube, subPoolResource);
      return pools.flatMap((p): Request[] =>
        p.metadata.name ? [{ controller, name: p.metadata.name }] : [],
      );
    },
  };
}
