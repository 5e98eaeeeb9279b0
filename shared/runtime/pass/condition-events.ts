import type { Condition, EventInput } from "../../kube/index.ts";
import type { ConditionPolarity, ControllerDefinition } from "../definition/index.ts";

/**
 * The Events a status change stands for (pure): one per condition named in the controller's
 * `conditionEvents` (plus its error policy's latch condition, as `negative`) whose status or reason
 * differs between `before` and `after`; a condition that first appears counts only when it is
 * bad (a Warning). A condition that disappears records nothing.
 *
 * @example
 * conditionEvents(def, [{ type: "Healthy", status: "True", ... }], [{ type: "Healthy", status: "False", reason: "ProbeFailed", ... }])
 * // → [{ type: "Warning", reason: "ProbeFailed", action: "Reconcile", note: "Healthy=False: ..." }]
 */
export function conditionEvents(
  def: Pick<ControllerDefinition, "conditionEvents" | "errorPolicy">,
  before: readonly Condition[] | undefined,
  after: readonly Condition[] | undefined,
): EventInput[] {
  const polarity: Record<string, ConditionPolarity> = { ...def.conditionEvents?.conditions };
  const progress = new Set(def.conditionEvents?.progressReasons ?? []);
  const latch = def.errorPolicy?.latch?.condition;
  if (latch) polarity[latch] = "negative";
  const events: EventInput[] = [];
  for (const next of after ?? []) {
    const p = polarity[next.type];
    if (!p) continue;
    const prev = before?.find((c) => c.type === next.type);
    if (prev && prev.status === next.status && prev.reason === next.reason) continue;
    const bad =
      !progress.has(next.reason) &&
      ((p === "positive" && next.status === "False") || (p === "negative" && next.status === "True"));
    // A condition's first appearance is news only when it is bad (a validation failure, a
    // conflict); a good or progressing start is what everyone expects.
    if (!prev && !bad) continue;
    events.push({
      type: bad ? "Warning" : "Normal",
      reason: next.reason || next.type,
      action: "Reconcile",
      note: `${next.type}=${next.status}${next.message ? `: ${next.message}` : ""}`,
    });
  }
  return events;
}
