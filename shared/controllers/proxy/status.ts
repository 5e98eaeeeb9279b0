/**
 * The Proxy's status as the reconciler writes it: condition helpers, the health projection and
 * the phase. Pure: every function takes the status and returns or mutates it, never the world.
 */

import { assertNever } from "../../guards/index.ts";
import type { HealthProjection } from "../../health/index.ts";
import {
  type Condition,
  findCondition,
  formatKubeTime,
  removeCondition,
  setCondition,
} from "../../kube/index.ts";
import { latchedAt } from "../../runtime/index.ts";
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

/** Sets one condition (lastTransitionTime moves only when the status flips). */
export function putCondition(
  status: ProxyStatus,
  type: ProxyConditionType,
  value: Condition["status"],
  reason: string,
  message: string,
  now: Date,
  observedGeneration?: number,
): void {
  const input = {
    type,
    status: value,
    reason,
    message,
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
  };
  const { conditions, changed } = setCondition(conditionsOf(status), input, now);
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
  now: Date,
): void {
  putCondition(status, ProxyConditionType.Provisioned, provisioned ? "True" : "False", reason, message, now);
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
 * fresh state from the existing condition, so a replaced instance or a lost annotation does not
 * make the condition flap. `lastHealthCheckTime` is the time of the last *reported* probe.
 */
export function applyHealth(
  status: ProxyStatus,
  projection: HealthProjection,
  healthCheckConfigured: boolean,
  now: Date,
): void {
  if (!healthCheckConfigured) {
    dropCondition(status, ProxyConditionType.Healthy);
    delete status.latencyMillis;
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
        now,
      );
      return;
    case "Reported": {
      putCondition(
        status,
        ProxyConditionType.Healthy,
        projection.healthy ? "True" : "False",
        projection.healthy ? ProxyReason.ProbeSucceeded : ProxyReason.ProbeFailed,
        projection.healthy ? "probes through the proxy succeed" : "probes through the proxy fail",
        now,
      );
      Object.assign(status, reportedLatencyFields(projection));
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
export function applyProbeTimeout(status: ProxyStatus, hc: ProxySpec["healthCheck"], now: Date): void {
  const capped = probeTimeoutCapped(hc);
  if (capped === undefined) dropCondition(status, ProxyConditionType.ProbeTimeoutCapped);
  else
    putCondition(
      status,
      ProxyConditionType.ProbeTimeoutCapped,
      "True",
      ProxyReason.TimeoutOutOfRange,
      capped,
      now,
    );
}

/**
 * `latencyMillis` and `lastHealthCheckTime` as status shows a report: the reconciler's projection
 * and the sweep's latency-report patch both come from here, so the two never disagree.
 */
export function reportedLatencyFields(report: {
  latencyMs?: number | undefined;
  at?: string | undefined;
}): Pick<ProxyStatus, "latencyMillis" | "lastHealthCheckTime"> {
  const out: Pick<ProxyStatus, "latencyMillis" | "lastHealthCheckTime"> = {};
  if (report.latencyMs !== undefined) out.latencyMillis = Math.max(0, Math.round(report.latencyMs));
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
 * | Provisioned False / CloudInitError | Pending |
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
  if (provisioned?.reason === ProxyReason.CloudInitError) return ProxyPhase.Pending;
  if (
    status.providerID ||
    provisioned?.reason === ProxyReason.Provisioning ||
    provisioned?.reason === ProxyReason.Replacing
  ) {
    return ProxyPhase.Provisioning;
  }
  return ProxyPhase.Pending;
}
