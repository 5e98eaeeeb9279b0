import { type Condition, conditionsOf, findCondition, type KubeObject } from "../../kube/index.ts";
import { type Readiness, SummaryConditionType } from "../../runtime/index.ts";
import { SiteReason } from "./api.ts";

/** Condition types a component may not publish: the Site's summary has them. */
export const summaryConditionTypes: ReadonlySet<string> = new Set(Object.values(SummaryConditionType));

/**
 * The Site's summary (pure) over its component conditions, `order` being the registry's:
 *
 * | component conditions (first that holds, in registry order) | Ready | progress |
 * | --- | --- | --- |
 * | none published yet | Unknown / Pending | reconciling |
 * | one False / InvalidSpec (the Site fails the schema) | False / InvalidSpec | stalled |
 * | one False / DeploymentStalled (past its progress deadline) | False / DeploymentStalled | stalled |
 * | one False / ReconcileError | False / ReconcileError, "<Type>: <message>" | settled (retried with backoff) |
 * | one False for another reason (a component waiting) | False / that reason | reconciling |
 * | one missing or Unknown | Unknown / Pending or its reason | reconciling |
 * | every one True (Reconciled, Disabled, NoSites) | True / Reconciled | settled |
 */
export function siteReadiness(order: readonly string[]): (object: KubeObject) => Readiness {
  return (object) => {
    const conditions = conditionsOf(object);
    const published = order.map((type) => ({ type, condition: findCondition(conditions, type) }));
    const pending = (message: string): Readiness => ({
      status: "Unknown",
      reason: SiteReason.Pending,
      message,
      progress: "reconciling",
    });
    if (published.every((p) => p.condition === undefined)) return pending("not reconciled yet");
    const named = (c: Condition) => `${c.type}: ${c.message}`;
    const failing = published.find((p) => p.condition?.status === "False")?.condition;
    if (failing) {
      const progress =
        failing.reason === SiteReason.InvalidSpec || failing.reason === SiteReason.DeploymentStalled
          ? "stalled"
          : failing.reason === SiteReason.ReconcileError
            ? "settled"
            : "reconciling";
      return { status: "False", reason: failing.reason, message: named(failing), progress };
    }
    const missing = published.find((p) => p.condition === undefined);
    if (missing) return pending(`${missing.type} not published yet`);
    const unknown = published.find((p) => p.condition?.status === "Unknown")?.condition;
    if (unknown)
      return { status: "Unknown", reason: unknown.reason, message: named(unknown), progress: "reconciling" };
    const off = published.filter((p) => p.condition?.reason === SiteReason.Disabled).map((p) => p.type);
    return {
      status: "True",
      reason: SiteReason.Reconciled,
      message: `all ${order.length} components reconciled${off.length > 0 ? ` (disabled: ${off.join(", ")})` : ""}`,
      progress: "settled",
    };
  };
}
