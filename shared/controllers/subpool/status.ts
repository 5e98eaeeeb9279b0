/**
 * Step 10, and every condition a pass writes. Conditions change only when status, reason,
 * message or observedGeneration change (shared/kube `setCondition`), so a converged pool's
 * status stays byte-for-byte the same and the executor writes nothing.
 */

import { assertNever, isRecord } from "../../guards/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import {
  type Condition,
  type ConditionInput,
  conditionsOf,
  findCondition,
  removeCondition,
  setCondition,
} from "../../kube/index.ts";
import type { Readiness } from "../../runtime/index.ts";
import { SubPoolReason as Reason, type SubPoolStatus, SubPoolConditionType as Type } from "./api.ts";

type Status = "True" | "False" | "Unknown";

/** What step 10 observed. */
export interface ReadinessObservation {
  suspended: boolean;
  statefulSet: { wanted: number; ready: number };
  /** Unknown while suspended (not evaluated). */
  proxyGateway: { ready: boolean; message: string } | undefined;
  /** Internal mode: undefined (no RouteReady condition). */
  route:
    | { state: "accepted"; message: string }
    | { state: "pending"; message: string }
    | { state: "apiMissing"; message: string }
    | { state: "suspended" }
    | undefined;
}

/** The four conditions of an active pool (pure). RouteReady is `null` when it must be absent. */
export function readinessConditions(obs: ReadinessObservation): {
  ready: Omit<ConditionInput, "type" | "observedGeneration">;
  proxyGateway: Omit<ConditionInput, "type" | "observedGeneration">;
  route: Omit<ConditionInput, "type" | "observedGeneration"> | null;
  suspended: Omit<ConditionInput, "type" | "observedGeneration">;
} {
  const c = (status: Status, reason: string, message: string) => ({ status, reason, message });
  if (obs.suspended) {
    return {
      ready: c(
        "False",
        Reason.Suspended,
        "spec.suspend is true: workloads scaled to zero; Namespace, PVC and Secret kept",
      ),
      proxyGateway: c("Unknown", Reason.Suspended, "not evaluated while the pool is suspended"),
      route:
        obs.route === undefined
          ? null
          : c("False", Reason.Suspended, "HTTPRoute removed while the pool is suspended"),
      suspended: c("True", Reason.Suspended, "spec.suspend is true"),
    };
  }
  const proxyGateway = obs.proxyGateway?.ready
    ? c("True", Reason.EndpointReady, obs.proxyGateway.message)
    : c("False", Reason.ProxyGatewayNotReady, obs.proxyGateway?.message ?? "not evaluated");
  let route: ReturnType<typeof c> | null = null;
  switch (obs.route?.state) {
    case undefined:
      break;
    case "accepted":
      route = c("True", Reason.Accepted, obs.route.message);
      break;
    case "pending":
      route = c("False", Reason.RouteNotReady, obs.route.message);
      break;
    case "apiMissing":
      route = c("False", Reason.GatewayAPIMissing, obs.route.message);
      break;
    case "suspended":
      route = c("False", Reason.Suspended, "HTTPRoute removed while the pool is suspended");
      break;
    default:
      return assertNever(obs.route);
  }
  const { wanted, ready: readyReplicas } = obs.statefulSet;
  let ready: ReturnType<typeof c>;
  if (readyReplicas < wanted) {
    ready = c(
      "False",
      Reason.StatefulSetNotReady,
      `StatefulSet has ${readyReplicas}/${wanted} ready replicas`,
    );
  } else if (proxyGateway.status !== "True") {
    ready = c("False", Reason.ProxyGatewayNotReady, proxyGateway.message);
  } else if (route && route.status !== "True") {
    ready = c("False", route.reason, route.message);
  } else {
    ready = c("True", Reason.Ready, "all managed objects exist and are ready");
  }
  return { ready, proxyGateway, route, suspended: c("False", Reason.Active, "spec.suspend is false") };
}

/** Sets conditions and fields on a SubPool's status in place, stamping the object's generation. */
export interface SubPoolStatusWriter {
  readonly status: SubPoolStatus;
  set(type: string, status: Status, reason: string, message: string): void;
  remove(type: string): void;
  /** The Ready condition, which carries every blocking reason. */
  ready(ok: boolean, reason: string, message: string): void;
}

export function statusWriter(object: KubeObject, now: Date): SubPoolStatusWriter {
  const status: SubPoolStatus = isRecord(object.status) ? (object.status as SubPoolStatus) : {};
  object.status = status;
  const generation = object.metadata.generation;
  const writer: SubPoolStatusWriter = {
    status,
    set(type, conditionStatus, reason, message) {
      const next: ConditionInput = { type, status: conditionStatus, reason, message };
      if (generation !== undefined) next.observedGeneration = generation;
      const { conditions, changed } = setCondition(status.conditions as Condition[] | undefined, next, now);
      if (changed) status.conditions = conditions;
    },
    remove(type) {
      const { conditions, changed } = removeCondition(status.conditions as Condition[] | undefined, type);
      if (changed) status.conditions = conditions;
    },
    ready(ok, reason, message) {
      writer.set(Type.Ready, ok ? "True" : "False", reason, message);
    },
  };
  return writer;
}

/** Ready reasons that wait for something to happen by itself: the summary says Reconciling. */
const progressReasons: ReadonlySet<string> = new Set([
  Reason.StatefulSetNotReady,
  Reason.RouteNotReady,
  Reason.NamespaceTerminating,
  Reason.DeletionBlocked,
]);

/** Ready reasons of a refused pool (validation, no retry): the summary says Stalled until an edit. */
const stalledReasons: ReadonlySet<string> = new Set([
  Reason.InvalidSpec,
  Reason.InvalidOperatorConfig,
  Reason.GatewayConfigIncomplete,
  Reason.ResourceEnvelopeExceeded,
]);

/**
 * The SubPool's summary (pure). Its pass writes `Ready` itself, with every blocking reason (the
 * seed's); the summary keeps it and adds what kind of not-ready it is:
 *
 * | Ready | progress |
 * | --- | --- |
 * | True / Ready | settled |
 * | False / StatefulSetNotReady, RouteNotReady, NamespaceTerminating, DeletionBlocked | reconciling |
 * | False / InvalidSpec, InvalidOperatorConfig, GatewayConfigIncomplete, ResourceEnvelopeExceeded | stalled |
 * | False / Suspended, a conflict, ProxyGatewayNotReady, GatewayAPIMissing | settled |
 * | absent (no pass got as far as writing it) | Unknown / Pending, reconciling |
 *
 * Caveats: a suspended pool is Ready=False/Suspended as the seed has it, so kstatus reads it as
 * InProgress; Argo CD's health script reads `Suspended=True` as Suspended.
 */
export function subPoolReadiness(object: KubeObject): Readiness {
  const ready = findCondition(conditionsOf(object), Type.Ready);
  if (!ready) {
    return {
      status: "Unknown",
      reason: Reason.Pending,
      message: "not reconciled yet",
      progress: "reconciling",
    };
  }
  const { status, reason, message } = ready;
  const progress =
    status === "True"
      ? "settled"
      : stalledReasons.has(reason)
        ? "stalled"
        : progressReasons.has(reason)
          ? "reconciling"
          : "settled";
  return { status, reason, message, progress };
}
