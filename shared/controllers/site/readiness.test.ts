import { describe, expect, it } from "vitest";
import type { Condition, KubeObject } from "../../kube/index.ts";
import { validateRegistry } from "./component.ts";
import { siteReadiness } from "./readiness.ts";

const order = ["NetReady", "MachinaReady", "MetalmanReady", "StorageReady"];
const c = (type: string, status: Condition["status"], reason: string): Condition => ({
  type,
  status,
  reason,
  message: `${reason.toLowerCase()}`,
  observedGeneration: 1,
  lastTransitionTime: "2026-11-30T11:00:00Z",
});
const all = (reason = "Reconciled") => order.map((type) => c(type, "True", reason));
const site = (conditions: Condition[]): KubeObject => ({
  apiVersion: "unbounded-cloud.io/v1alpha3",
  kind: "Site",
  metadata: { name: "west", generation: 1 },
  status: { conditions },
});
const replace = (type: string, by: Condition) => all().map((x) => (x.type === type ? by : x));

describe("siteReadiness", () => {
  it.each<[string, Condition[], string, string?]>([
    ["nothing published yet", [], "Unknown/Pending/reconciling"],
    ["every component reconciled", all(), "True/Reconciled/settled", "all 4 components reconciled"],
    [
      "a disabled component is fine",
      replace("StorageReady", c("StorageReady", "True", "Disabled")),
      "True/Reconciled/settled",
      "all 4 components reconciled (disabled: StorageReady)",
    ],
    [
      "a component failed: its reason, named",
      replace("MetalmanReady", c("MetalmanReady", "False", "ReconcileError")),
      "False/ReconcileError/settled",
      "MetalmanReady: reconcileerror",
    ],
    [
      "the first failing component in registry order explains",
      all().map((x) =>
        x.type === "NetReady" || x.type === "StorageReady"
          ? c(x.type, "False", x.type === "NetReady" ? "Booting" : "ReconcileError")
          : x,
      ),
      "False/Booting/reconciling",
      "NetReady: booting",
    ],
    [
      "the Site fails the schema",
      order.map((t) => c(t, "False", "InvalidSpec")),
      "False/InvalidSpec/stalled",
    ],
    [
      "a component not published yet",
      all().slice(0, 3),
      "Unknown/Pending/reconciling",
      "StorageReady not published yet",
    ],
    [
      "a component Unknown",
      replace("NetReady", c("NetReady", "Unknown", "Waiting")),
      "Unknown/Waiting/reconciling",
    ],
    [
      "conditions of others are not components",
      [...all(), c("SomethingElse", "False", "Nope")],
      "True/Reconciled/settled",
    ],
  ])("%s → %s", (_name, conditions, want, message) => {
    const r = siteReadiness(order)(site(conditions));
    expect(`${r.status}/${r.reason}/${r.progress}`).toBe(want);
    if (message !== undefined) expect(r.message).toBe(message);
  });

  it.each(["Ready", "Reconciling", "Stalled"])("refuses a component publishing %s", (type) => {
    const component = {
      name: "x",
      conditionType: type,
      enabled: () => true,
      reconcile: async () => ({ ready: true, reason: "R", message: "" }),
      cleanup: async () => {},
    };
    expect(() => validateRegistry({ cluster: [], site: [component] })).toThrow(/is the Site's summary/);
  });
});
