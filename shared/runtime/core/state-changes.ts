import type { Condition, KubeObject } from "../../kube/index.ts";
import { conditionsOf } from "../../kube/index.ts";
import type { Log, Metrics } from "./observe.ts";

/**
 * State changes users route: kubefn's own "an instance stopped, a task failed" — a Proxy became
 * Ready or Unhealthy, its instance was replaced, a SubPool became Ready or was refused, a Site
 * component's condition changed, kubefn's admission gate closed. Each platform delivers them to
 * a sink the user names (Lambda: an EventBridge bus; Workers: a bound Queue; the Node host:
 * CloudEvents over HTTP), all in one schema ({@link StateChange}), documented in
 * docs/monitoring.md.
 *
 * A change is published by the pass whose status write made it (the write is guarded by the
 * resourceVersion it read, so two concurrent passes never both publish one change), and only
 * then: a pass that writes nothing, a probe, a sweep publish nothing.
 */

/** `source` of every change (EventBridge `source`, CloudEvents `source` prefix). */
export const STATE_CHANGE_SOURCE = "kubefn";
/** The version of {@link StateChangeDetail}: grows only by new optional fields within a version. */
export const STATE_CHANGE_VERSION = "1";

/** The `detail-type` (EventBridge) or, lower-cased with dots, the CloudEvents `type` of a change. */
export const StateChangeType = {
  /** A Proxy's `Ready` condition turned True. */
  ProxyReady: "Proxy Ready",
  /** A Proxy's `Healthy` condition turned False (the failure threshold was crossed). */
  ProxyUnhealthy: "Proxy Unhealthy",
  /** A Managed Proxy's instance is being replaced (`Provisioned=False/Replacing`): the old one deleted. */
  ProxyInstanceReplaced: "Proxy Instance Replaced",
  /** A SubPool's `Ready` condition turned True. */
  SubPoolReady: "SubPool Ready",
  /** A SubPool's `Ready` turned False for a reason only an edit fixes (a conflict, an invalid spec). */
  SubPoolRefused: "SubPool Refused",
  /** A Site component's condition changed status or reason. */
  SiteComponentChanged: "Site Component Changed",
  /** kubefn's admission gate closed: it reconciles nothing until its admission policies are back. */
  AdmissionGateClosed: "Admission Gate Closed",
} as const;
export type StateChangeType = (typeof StateChangeType)[keyof typeof StateChangeType];

/** The object a change is about. */
export interface StateChangeObject {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid?: string;
  generation?: number;
}

/** A condition as it is after the change, and what it was before (absent when it first appeared). */
export interface StateChangeCondition {
  type: string;
  status: string;
  reason: string;
  message?: string;
  lastTransitionTime?: string;
  previous?: { status: string; reason: string };
}

/** EventBridge `detail` / CloudEvents `data`: versioned by {@link STATE_CHANGE_VERSION}. */
export interface StateChangeDetail {
  version: typeof STATE_CHANGE_VERSION;
  object?: StateChangeObject;
  condition?: StateChangeCondition;
  /** {@link StateChangeType.ProxyInstanceReplaced}: the instance that was replaced. */
  instance?: { replaced: string };
  /** {@link StateChangeType.AdmissionGateClosed}: what is missing. */
  admission?: { problems: string[] };
}

export interface StateChange {
  type: StateChangeType;
  /** When the change was written (RFC 3339). */
  time: string;
  detail: StateChangeDetail;
}

/** Where a platform delivers state changes. One call carries at most a pass's few changes. */
export interface StateChangeSink {
  publish(changes: readonly StateChange[]): Promise<void>;
}

/** A controller's state changes between the status it read and the one it wrote (pure). */
export type StateChangesOf = (before: KubeObject, after: KubeObject, at: Date) => StateChange[];

/** The object part of a change. */
export function changeObject(object: KubeObject): StateChangeObject {
  const m = object.metadata;
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    ...(m.namespace ? { namespace: m.namespace } : {}),
    name: m.name ?? "",
    ...(m.uid ? { uid: m.uid } : {}),
    ...(typeof m.generation === "number" ? { generation: m.generation } : {}),
  };
}

/**
 * The condition `type` of `after` when its status or reason differs from `before`'s (or it first
 * appeared), with its previous status and reason; undefined when it did not change.
 */
export function changedCondition(
  before: KubeObject,
  after: KubeObject,
  type: string,
): StateChangeCondition | undefined {
  const next = find(conditionsOf(after), type);
  if (!next) return undefined;
  const prev = find(conditionsOf(before), type);
  if (prev && prev.status === next.status && prev.reason === next.reason) return undefined;
  return {
    type,
    status: next.status,
    reason: next.reason,
    ...(next.message ? { message: next.message } : {}),
    ...(next.lastTransitionTime ? { lastTransitionTime: next.lastTransitionTime } : {}),
    ...(prev ? { previous: { status: prev.status, reason: prev.reason } } : {}),
  };
}

/** A change about `object`'s condition. */
export function conditionChange(
  type: StateChangeType,
  object: KubeObject,
  condition: StateChangeCondition,
  at: Date,
  extra: Pick<StateChangeDetail, "instance"> = {},
): StateChange {
  return {
    type,
    time: at.toISOString(),
    detail: { version: STATE_CHANGE_VERSION, object: changeObject(object), condition, ...extra },
  };
}

function find(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** The default of `STATE_CHANGES_PER_INVOCATION`. */
export const DEFAULT_STATE_CHANGES_PER_INVOCATION = 100;

/**
 * `sink` for one invocation (a queue batch, a Lambda event, one of the Node host's sends): at
 * most `max` changes in all, the rest dropped and counted
 * (`kubefn_state_changes_dropped_total{reason="bound"}`), so a storm — every Proxy of a fleet
 * going Unhealthy at once — costs a bounded number of events per invocation. A failed delivery is
 * logged and counted (`reason="failed"`), never thrown: a change is a notification, not a write,
 * and no pass fails for it. Delivered ones count in `kubefn_state_changes_total{type}`.
 *
 * Caveats: a dropped or failed change is not sent again (the status keeps the state; the
 * condition's Event is written apart from it).
 */
export function boundedStateChanges(
  sink: StateChangeSink,
  opts: { max: number; log: Log; metrics: Metrics },
): StateChangeSink {
  let left = opts.max;
  return {
    async publish(changes) {
      if (changes.length === 0) return;
      const sent = changes.slice(0, Math.max(0, left));
      left -= sent.length;
      const dropped = changes.length - sent.length;
      if (dropped > 0) {
        opts.metrics.count("kubefn_state_changes_dropped_total", { reason: "bound" }, dropped);
        opts.log.warn("state changes over this invocation's bound were not published", {
          dropped,
          bound: opts.max,
        });
      }
      if (sent.length === 0) return;
      try {
        await sink.publish(sent);
        for (const change of sent) opts.metrics.count("kubefn_state_changes_total", { type: change.type });
      } catch (err) {
        opts.metrics.count("kubefn_state_changes_dropped_total", { reason: "failed" }, sent.length);
        opts.log.warn("state changes could not be published", {
          types: sent.map((c) => c.type),
          error: String(err),
        });
      }
    },
  };
}

/**
 * A change as a CloudEvent (structured mode, spec 1.0): `type` `dev.kubefn.<detail-type words>`
 * (e.g. `dev.kubefn.proxy.unhealthy`), `source` `kubefn`, `subject` the object's
 * `namespace/name`, `data` the detail.
 */
export function cloudEventOf(change: StateChange, id: string): Record<string, unknown> {
  const o = change.detail.object;
  return {
    specversion: "1.0",
    id,
    source: STATE_CHANGE_SOURCE,
    type: cloudEventType(change.type),
    time: change.time,
    ...(o ? { subject: `${o.kind}/${o.namespace ? `${o.namespace}/` : ""}${o.name}` } : {}),
    datacontenttype: "application/json",
    dataschema: `https://kubefn.dev/schemas/state-change/v${STATE_CHANGE_VERSION}`,
    data: change.detail,
  };
}

/** `Proxy Unhealthy` → `dev.kubefn.proxy.unhealthy`. */
export function cloudEventType(type: StateChangeType): string {
  return `dev.kubefn.${type.toLowerCase().replace(/ /g, ".")}`;
}
