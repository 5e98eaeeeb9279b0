import { describe, expect, it } from "vitest";
import type { Condition } from "../../kube/index.ts";
import { conditionEvents } from "./condition-events.ts";

const c = (type: string, status: Condition["status"], reason: string, message = ""): Condition => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: "2026-01-01T00:00:00Z",
});

const def = {
  conditionEvents: {
    conditions: { Healthy: "positive", Quota: "negative", Suspended: "neutral" } as const,
    progressReasons: ["Provisioning"],
  },
  errorPolicy: { latch: { condition: "Latched" } },
};

describe("conditionEvents", () => {
  it.each([
    [
      "no change records nothing (steady state)",
      [c("Healthy", "True", "Ok")],
      [c("Healthy", "True", "Ok", "new message")],
      [],
    ],
    [
      "a flip to False on a positive condition is a Warning",
      [c("Healthy", "True", "Ok")],
      [c("Healthy", "False", "ProbeFailed", "timeout")],
      [{ type: "Warning", reason: "ProbeFailed", action: "Reconcile", note: "Healthy=False: timeout" }],
    ],
    [
      "a flip back is Normal",
      [c("Healthy", "False", "ProbeFailed")],
      [c("Healthy", "True", "ProbeSucceeded")],
      [{ type: "Normal", reason: "ProbeSucceeded", action: "Reconcile", note: "Healthy=True" }],
    ],
    [
      "a reason change at the same status counts",
      [c("Healthy", "False", "ProbeFailed")],
      [c("Healthy", "False", "ProbeTargetRefused")],
      [{ type: "Warning", reason: "ProbeTargetRefused", action: "Reconcile", note: "Healthy=False" }],
    ],
    [
      "a bad first appearance counts",
      [],
      [c("Quota", "True", "QuotaExceeded")],
      [{ type: "Warning", reason: "QuotaExceeded", action: "Reconcile", note: "Quota=True" }],
    ],
    [
      "a progress reason is Normal",
      [c("Healthy", "True", "Ok")],
      [c("Healthy", "False", "Provisioning")],
      [{ type: "Normal", reason: "Provisioning", action: "Reconcile", note: "Healthy=False" }],
    ],
    ["a good first appearance is no news", undefined, [c("Healthy", "True", "Ok")], []],
    ["a progressing first appearance is no news", [], [c("Healthy", "False", "Provisioning")], []],
    [
      "neutral conditions are Normal both ways",
      [c("Suspended", "False", "Active")],
      [c("Suspended", "True", "Suspended")],
      [{ type: "Normal", reason: "Suspended", action: "Reconcile", note: "Suspended=True" }],
    ],
    [
      "the permanent-error latch is negative",
      [],
      [c("Latched", "True", "InvalidSpec", "bad")],
      [{ type: "Warning", reason: "InvalidSpec", action: "Reconcile", note: "Latched=True: bad" }],
    ],
    ["unlisted conditions record nothing", [], [c("Other", "False", "Nope")], []],
  ])("%s", (_name, before, after, want) => {
    expect(conditionEvents(def, before, after)).toEqual(want);
  });
});
