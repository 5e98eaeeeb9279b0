import { isRecord } from "../../guards/index.ts";
import {
  type Condition,
  type ConditionInput,
  conditionsOf,
  type KubeObject,
  removeCondition,
  setCondition,
} from "../../kube/index.ts";

/**
 * The summary conditions every primary carries, as the API conventions and the tools that read
 * them expect: `Ready` (`kubectl wait --for=condition=Ready`, kstatus' last rule, Argo CD's health
 * scripts) and kstatus' abnormal-true pair — `Reconciling` True while the object is on its way,
 * `Stalled` True when it cannot progress without a change from outside. Both of those are absent
 * otherwise.
 */
export const SummaryConditionType = {
  Ready: "Ready",
  Reconciling: "Reconciling",
  Stalled: "Stalled",
} as const;
export type SummaryConditionType = (typeof SummaryConditionType)[keyof typeof SummaryConditionType];

/**
 * What an object's summary says, decided by its controller from the status a pass left.
 *
 * | progress | Ready | Reconciling | Stalled | kstatus | Argo CD (infra/argocd) |
 * | --- | --- | --- | --- | --- | --- |
 * | `settled`, Ready True | True | — | — | Current | Healthy |
 * | `reconciling` | False or Unknown | True | — | InProgress | Progressing |
 * | `settled`, Ready False | False | — | — | InProgress | Degraded |
 * | `stalled` | False | — | True | Failed | Degraded |
 *
 * `Reconciling` and `Stalled`, when present, carry Ready's reason and message.
 */
export interface Readiness {
  status: Condition["status"];
  /** CamelCase: the failing component condition's reason, or why it is ready (`Healthy`, `Reconciled`). */
  reason: string;
  message: string;
  progress: "settled" | "reconciling" | "stalled";
}

/**
 * Writes `readiness` onto the object's `status.conditions` in place: `Ready`, and `Reconciling` /
 * `Stalled` set or removed, each stamped with `metadata.generation`. Returns whether anything
 * changed. As with every condition, `lastTransitionTime` moves only when a status flips, so a
 * summary that says the same writes nothing.
 */
export function applyReadiness(object: KubeObject, readiness: Readiness, now: Date): boolean {
  const generation = object.metadata.generation;
  const at = generation === undefined ? {} : { observedGeneration: generation };
  const { status, reason, message, progress } = readiness;
  let conditions: readonly Condition[] | undefined = conditionsOf(object);
  let changed = false;
  const put = (input: ConditionInput) => {
    const next = setCondition(conditions, input, now);
    conditions = next.conditions;
    changed ||= next.changed;
  };
  const drop = (type: string) => {
    const next = removeCondition(conditions, type);
    conditions = next.conditions;
    changed ||= next.changed;
  };
  put({ type: SummaryConditionType.Ready, status, reason, message, ...at });
  for (const [type, when] of [
    [SummaryConditionType.Reconciling, "reconciling"],
    [SummaryConditionType.Stalled, "stalled"],
  ] as const) {
    if (progress === when) put({ type, status: "True", reason, message, ...at });
    else drop(type);
  }
  if (changed) {
    const holder = isRecord(object.status) ? object.status : {};
    holder.conditions = [...(conditions ?? [])];
    object.status = holder;
  }
  return changed;
}

/**
 * Whether writing `readiness` would change the object's summary (pure): for drift decisions, so
 * that an object whose summary is missing or stale (written before a change of the summary's
 * rules) gets a pass.
 */
export function readinessDiffers(object: KubeObject, readiness: Readiness): boolean {
  const conditions = conditionsOf(object);
  const probe: KubeObject = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      ...(object.metadata.generation === undefined ? {} : { generation: object.metadata.generation }),
    },
    status: conditions ? { conditions: [...conditions] } : {},
  };
  return applyReadiness(probe, readiness, new Date(0));
}
