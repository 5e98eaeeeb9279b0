/**
 * Whether a component's Deployment runs, read from the object its apply returned (or the sweep
 * listed): the figure `MachinaReady` and `MetalmanReady` report, so that True means "it runs",
 * not "it was applied".
 */
import { type Condition, findCondition, type KubeObject } from "../../../kube/index.ts";
import { SiteReason } from "../api.ts";
import { notReady, notReadyAfter, type Result } from "../component.ts";

/** Where a Deployment stands: rolled out and available, on its way, or past its deadline. */
export type Availability =
  | { readonly state: "available"; readonly message: string }
  | { readonly state: "progressing"; readonly message: string; readonly sinceSeconds: number }
  | { readonly state: "stalled"; readonly message: string };

interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  conditions?: Condition[];
}

/**
 * The Deployment's availability (pure), by the rules kstatus applies to Deployments: the
 * controller has observed this generation, every desired replica is updated and available, and
 * `Progressing` has not failed with `ProgressDeadlineExceeded`. `now` dates how long it has been
 * progressing (from the `Progressing` condition's last update, else the object's creation).
 */
export function deploymentAvailability(deployment: KubeObject, now: number = Date.now()): Availability {
  const name = deployment.metadata.name ?? "deployment";
  const desired = (deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  const status = (deployment.status ?? {}) as DeploymentStatus;
  const conditions = status.conditions ?? [];
  const progressing = findCondition(conditions, "Progressing");
  if (progressing?.status === "False" && progressing.reason === "ProgressDeadlineExceeded") {
    return { state: "stalled", message: `${name}: ${progressing.message ?? "progress deadline exceeded"}` };
  }
  const available = status.availableReplicas ?? 0;
  const updated = status.updatedReplicas ?? 0;
  const observed = status.observedGeneration ?? 0;
  const generation = deployment.metadata.generation ?? 0;
  if (
    observed >= generation &&
    updated >= desired &&
    available >= desired &&
    (status.replicas ?? 0) <= desired
  ) {
    return { state: "available", message: `${name}: ${available}/${desired} replicas available` };
  }
  const since = Date.parse(
    (progressing as { lastUpdateTime?: string } | undefined)?.lastUpdateTime ??
      deployment.metadata.creationTimestamp ??
      "",
  );
  const sinceSeconds = Number.isFinite(since) ? Math.max(0, (now - since) / 1000) : 0;
  const waiting =
    observed < generation
      ? "rollout not observed yet"
      : `${updated}/${desired} updated, ${available}/${desired} available`;
  return { state: "progressing", message: `${name}: ${waiting}`, sinceSeconds };
}

/** The first re-check of a Deployment on its way, and the longest wait between re-checks. */
export const availabilityRecheck = { firstSeconds: 5, maxSeconds: 300 } as const;

/**
 * The component's Result for its applied Deployment: True (`Reconciled`, the replica count in the
 * message) once available; False/`DeploymentProgressing` while on its way, re-checked after half
 * the time it has been progressing (5 s to 5 min: a quick rollout is seen within seconds, a stuck
 * one costs a read every few minutes, not every few seconds); False/`DeploymentStalled` once
 * past its progress deadline (no re-check: the drift period's pass and the Deployment's next
 * rollout bring one).
 */
export function availabilityResult(deployment: KubeObject | undefined, now: number = Date.now()): Result {
  if (!deployment) return notReadyAfter(SiteReason.DeploymentProgressing, "deployment not applied yet", 5);
  const a = deploymentAvailability(deployment, now);
  switch (a.state) {
    case "available":
      return { ready: true, reason: SiteReason.Reconciled, message: a.message };
    case "stalled":
      return notReady(SiteReason.DeploymentStalled, a.message);
    case "progressing": {
      const { firstSeconds, maxSeconds } = availabilityRecheck;
      const after = Math.min(maxSeconds, Math.max(firstSeconds, Math.round(a.sinceSeconds / 2)));
      return notReadyAfter(SiteReason.DeploymentProgressing, a.message, after);
    }
  }
}
