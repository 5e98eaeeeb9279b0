/**
 * The Proxy's status as the reconciler writes it: condition helpers, the health projection and
 * the phase. Pure: every function takes the status and returns or mutates it, never the world.
 */

import { assertNever, errorMessage, isRecord } from "../../guards/index.ts";
import type { HealthProjection } from "../../health/index.ts";
import {
  type Condition,
  classifyError,
  conditionsOf as conditionsOfObject,
  findCondition,
  formatKubeTime,
  type KubeObject,
  removeCondition,
  setCondition,
} from "../../kube/index.ts";
import { latchedAt, type Outcome, type Readiness } from "../../runtime/index.ts";
import {
  maxProbeTimeoutSeconds,
  ProxyConditionType,
  ProxyPhase,
  ProxyReason,
  type ProxySpec,
  type ProxyStatus,
  probeTimeoutSeconds,
} from "./api.ts";

/** `status.conditions` as shared/kube's condition helpers type it. */
function conditionsOf(status: ProxyStatus): Condition[] | undefined {
  return status.conditions as Condition[] | undefined;
}

/**
 * When a pass sets conditions, and the `metadata.generation` it read: every condition it sets
 * carries that generation as its `observedGeneration`.
 */
export interface ConditionStamp {
  now: Date;
  generation: number | undefined;
}

/** The stamp of a pass over `object` at `now`. */
export function stampAt(now: Date, object: { metadata: { generation?: number } }): ConditionStamp {
  return { now, generation: object.metadata.generation };
}

/** Sets one condition (lastTransitionTime moves only when the status flips). */
export function putCondition(
  status: ProxyStatus,
  type: ProxyConditionType,
  value: Condition["status"],
  reason: string,
  message: string,
  at: ConditionStamp,
): void {
  const input = {
    type,
    status: value,
    reason,
    message,
    ...(at.generation === undefined ? {} : { observedGeneration: at.generation }),
  };
  const { conditions, changed } = setCondition(conditionsOf(status), input, at.now);
  if (changed) status.conditions = conditions;
}

/** Removes a condition; leaves `status.conditions` untouched when it was absent. */
export function dropCondition(status: ProxyStatus, type: ProxyConditionType): void {
  const { conditions, changed } = removeCondition(conditionsOf(status), type);
  if (!changed) return;
  if (conditions.length > 0) status.conditions = conditions;
  else delete status.conditions;
}

export function conditionOf(status: ProxyStatus, type: ProxyConditionType): Condition | undefined {
  return findCondition(conditionsOf(status), type);
}

/** Sets `Provisioned`. */
export function setProvisioned(
  status: ProxyStatus,
  provisioned: boolean,
  reason: ProxyReason,
  message: string,
  at: ConditionStamp,
): void {
  putCondition(status, ProxyConditionType.Provisioned, provisioned ? "True" : "False", reason, message, at);
}

/**
 * Projects the sweep's health bookkeeping into status: the `Healthy` condition, `latencyMillis`
 * and `lastHealthCheckTime`.
 *
 * | projection | Healthy | latency / time |
 * | --- | --- | --- |
 * | no healthCheck in spec | removed | removed |
 * | Unknown (no report yet for this instance) | unchanged | unchanged |
 * | Refused | False / ProbeTargetRefused, with the refusal message | unchanged |
 * | Reported | True / ProbeSucceeded or False / ProbeFailed | from the report |
 *
 * Caveats: Unknown leaves the condition as it was rather than writing Unknown: the sweep seeds a
 * fresh state from the existing condition, so a replaced instance or a lost `status.health` does not
 * make the condition flap, and keeps the `observedGeneration` it was set at. `lastHealthCheckTime`
 * is the time of the last *reported* probe.
 */
export function applyHealth(
  status: ProxyStatus,
  projection: HealthProjection,
  healthCheckConfigured: boolean,
  at: ConditionStamp,
): void {
  if (!healthCheckConfigured) {
    dropCondition(status, ProxyConditionType.Healthy);
    delete status.latencyMillis;
    delete status.latencySamples;
    delete status.lastHealthCheckTime;
    return;
  }
  switch (projection.kind) {
    case "Unknown":
      return;
    case "Refused":
      putCondition(
        status,
        ProxyConditionType.Healthy,
        "False",
        ProxyReason.ProbeTargetRefused,
        `${projection.reason}: ${projection.message}`,
        at,
      );
      return;
    case "Reported": {
      putCondition(
        status,
        ProxyConditionType.Healthy,
        projection.healthy ? "True" : "False",
        projection.healthy ? ProxyReason.ProbeSucceeded : ProxyReason.ProbeFailed,
        projection.healthy ? "probes through the proxy succeed" : "probes through the proxy fail",
        at,
      );
      // Assigned in place, not deleted and added again: a key moved to the end would make the
      // drift's comparison with the status the API server returns see a change every sweep.
      const reported = reportedLatencyFields(projection);
      if (reported.latencySamples === undefined) delete status.latencySamples;
      Object.assign(status, reported);
      return;
    }
    default:
      assertNever(projection);
  }
}

/** Why probes of this health check use less than its `timeoutSeconds`, or undefined when they do not. */
export function probeTimeoutCapped(hc: ProxySpec["healthCheck"]): string | undefined {
  if (!hc || probeTimeoutSeconds(hc) === hc.timeoutSeconds) return undefined;
  return `healthCheck.timeoutSeconds ${hc.timeoutSeconds} is above ${maxProbeTimeoutSeconds} or intervalSeconds: probes give up after ${probeTimeoutSeconds(hc)} s`;
}

/** ProbeTimeoutCapped=True/TimeoutOutOfRange while the stored timeout is out of range; else absent. */
export function applyProbeTimeout(
  status: ProxyStatus,
  hc: ProxySpec["healthCheck"],
  at: ConditionStamp,
): void {
  const capped = probeTimeoutCapped(hc);
  if (capped === undefined) dropCondition(status, ProxyConditionType.ProbeTimeoutCapped);
  else
    putCondition(
      status,
      ProxyConditionType.ProbeTimeoutCapped,
      "True",
      ProxyReason.TimeoutOutOfRange,
      capped,
      at,
    );
}

/**
 * `latencyMillis`, `latencySamples` and `lastHealthCheckTime` as status shows a report: the
 * reconciler's projection and the sweep's latency-report patch both come from here, so the two
 * never disagree. `latencySamples` is how many probes `latencyMillis` is the median of (1: the
 * seed's one probe; 3: a confirmed latency change), removed when the report does not say.
 */
export function reportedLatencyFields(report: {
  latencyMs?: number | undefined;
  at?: string | undefined;
  samples?: number | undefined;
}): Pick<ProxyStatus, "latencyMillis" | "latencySamples" | "lastHealthCheckTime"> {
  const out: Pick<ProxyStatus, "latencyMillis" | "latencySamples" | "lastHealthCheckTime"> = {};
  if (report.latencyMs !== undefined) out.latencyMillis = Math.max(0, Math.round(report.latencyMs));
  if (report.latencyMs !== undefined && report.samples !== undefined) out.latencySamples = report.samples;
  if (report.at !== undefined) {
    const at = new Date(report.at);
    if (!Number.isNaN(at.getTime())) out.lastHealthCheckTime = formatKubeTime(at);
  }
  return out;
}

/**
 * The phase, from the conditions and the deletion mark:
 *
 * | state | phase |
 * | --- | --- |
 * | deletionTimestamp set | Deleting |
 * | PermanentError True at this generation | Failed |
 * | Provisioned True, Healthy False | Unhealthy |
 * | Provisioned True otherwise | Ready |
 * | Provisioned False / CloudInitError or NamespaceNotOptedIn | Pending |
 * | an instance exists (providerID), or Provisioned False / Provisioning or Replacing | Provisioning |
 * | otherwise | Pending |
 */
export function computePhase(
  status: ProxyStatus,
  object: { deleting: boolean; generation: number | undefined; healthChecked?: boolean },
): ProxyPhase {
  if (object.deleting) return ProxyPhase.Deleting;
  // The error policy's latch (failure.ts): PermanentError True at this generation.
  if (latchedAt(conditionsOf(status), ProxyConditionType.PermanentError, object.generation)) {
    return ProxyPhase.Failed;
  }
  const provisioned = conditionOf(status, ProxyConditionType.Provisioned);
  if (provisioned?.status === "True") {
    const healthy = conditionOf(status, ProxyConditionType.Healthy)?.status;
    if (healthy === "False") return ProxyPhase.Unhealthy;
    // With a health check, Ready means its probes passed: crawlers are handed Ready proxies.
    if (object.healthChecked && healthy !== "True") return ProxyPhase.Provisioning;
    return ProxyPhase.Ready;
  }
  if (waitsOnTenant(provisioned?.reason)) return ProxyPhase.Pending;
  if (
    status.providerID ||
    provisioned?.reason === ProxyReason.Provisioning ||
    provisioned?.reason === ProxyReason.Replacing
  ) {
    return ProxyPhase.Provisioning;
  }
  return ProxyPhase.Pending;
}

/**
 * The Proxy's summary (pure), from its conditions as the pass and the error policy left them:
 *
 * | state (first that holds) | Ready | progress |
 * | --- | --- | --- |
 * | the pass failed the schema (InvalidSpec) | False / InvalidSpec | stalled |
 * | deletionTimestamp set | False / Deleting | reconciling |
 * | PermanentError True at this generation | False / its reason (e.g. UnknownProvider) | stalled |
 * | Provisioned True, Healthy False | False / Healthy's reason (ProbeFailed, ProbeTargetRefused) | settled |
 * | Provisioned True, a health check, no verdict yet | Unknown / AwaitingHealthCheck | reconciling |
 * | Provisioned True otherwise | True / Healthy (probed) or Provisioned | settled |
 * | QuotaExceeded True | False / QuotaExceeded | settled (retried on the quota interval) |
 * | Provisioned False / CloudInitError | False / CloudInitError | settled (waits on the Secret) |
 * | Provisioned False / NamespaceNotOptedIn | False / NamespaceNotOptedIn | settled (waits on the namespace's RoleBinding) |
 * | Provisioned False otherwise | False / its reason (Provisioning, Replacing) | reconciling |
 * | no Provisioned yet | Unknown / Pending | reconciling |
 *
 * Ready is True exactly when {@link computePhase} says Ready. ProbeTimeoutCapped is a warning, not
 * a failure: it does not change Ready.
 */
export function proxyReadiness(object: KubeObject, outcome?: Outcome): Readiness | undefined {
  if (outcome?.kind === "error") {
    const { class: cls, reason } = classifyError(outcome.error);
    if (cls === "permanent" && reason === "InvalidSpec") {
      return { status: "False", reason, message: errorMessage(outcome.error), progress: "stalled" };
    }
  }
  const status = (isRecord(object.status) ? object.status : {}) as ProxyStatus;
  const c = (type: ProxyConditionType) => conditionOf(status, type);
  const from = (
    condition: Condition,
    value: Condition["status"],
    progress: Readiness["progress"],
  ): Readiness => ({ status: value, reason: condition.reason, message: condition.message, progress });
  if (object.metadata.deletionTimestamp) {
    const provisioned = c(ProxyConditionType.Provisioned);
    const message = provisioned?.reason === ProxyReason.Deleting ? provisioned.message : "being deleted";
    return { status: "False", reason: ProxyReason.Deleting, message, progress: "reconciling" };
  }
  const latched = c(ProxyConditionType.PermanentError);
  if (latchedAt(conditionsOfObject(object), ProxyConditionType.PermanentError, object.metadata.generation)) {
    return from(latched!, "False", "stalled");
  }
  const provisioned = c(ProxyConditionType.Provisioned);
  if (provisioned?.status === "True") {
    const healthy = c(ProxyConditionType.Healthy);
    if (healthy?.status === "False") return from(healthy, "False", "settled");
    const healthChecked = isRecord(object.spec) && object.spec.healthCheck !== undefined;
    if (healthChecked && healthy?.status !== "True") {
      return {
        status: "Unknown",
        reason: ProxyReason.AwaitingHealthCheck,
        message: `${provisioned.message}; waiting for the first health verdict`,
        progress: "reconciling",
      };
    }
    return healthChecked
      ? { ...from(healthy!, "True", "settled"), reason: ProxyReason.Healthy }
      : { ...from(provisioned, "True", "settled"), reason: ProxyReason.Provisioned };
  }
  const quota = c(ProxyConditionType.QuotaExceeded);
  if (quota?.status === "True") return from(quota, "False", "settled");
  if (!provisioned) {
    return {
      status: "Unknown",
      reason: ProxyReason.Pending,
      message: "not reconciled yet",
      progress: "reconciling",
    };
  }
  return from(provisioned, "False", waitsOnTenant(provisioned.reason) ? "settled" : "reconciling");
}

/** Whether Provisioned waits on the tenant: its cloud-init Secret, or its namespace's opt-in. */
function waitsOnTenant(reason: string | undefined): boolean {
  return reason === ProxyReason.CloudInitError || reason === ProxyReason.NamespaceNotOptedIn;
}
