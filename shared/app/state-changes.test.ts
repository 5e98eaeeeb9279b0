import { describe, expect, it } from "vitest";
import { proxyStateChanges } from "../controllers/proxy/state-changes.ts";
import { siteStateChanges } from "../controllers/site/state-changes.ts";
import { subPoolStateChanges } from "../controllers/subpool/state-changes.ts";
import type { Condition, KubeObject } from "../kube/index.ts";
import { boundedStateChanges, type StateChange, type StateChangeSink } from "../runtime/index.ts";

const AT = new Date("2026-12-03T12:00:00Z");
const c = (type: string, status: Condition["status"], reason: string): Condition => ({
  type,
  status,
  reason,
  message: "",
  lastTransitionTime: AT.toISOString(),
});
const obj = (...conditions: Condition[]): KubeObject => ({
  apiVersion: "v1",
  kind: "X",
  metadata: { name: "x", namespace: "ns", uid: "u" },
  status: { conditions, providerID: "i-1" },
});
const types = (changes: StateChange[]) => changes.map((ch) => ch.type);

describe("which status changes are state changes (pure)", () => {
  it.each([
    [
      "Ready Unknown → True",
      [c("Ready", "Unknown", "Pending")],
      [c("Ready", "True", "Ready")],
      ["Proxy Ready"],
    ],
    ["Ready True → True (message only)", [c("Ready", "True", "Ready")], [c("Ready", "True", "Ready")], []],
    [
      "Healthy True → False",
      [c("Healthy", "True", "Ok")],
      [c("Healthy", "False", "ProbeFailed")],
      ["Proxy Unhealthy"],
    ],
    [
      "Healthy False → False, another reason",
      [c("Healthy", "False", "A")],
      [c("Healthy", "False", "B")],
      ["Proxy Unhealthy"],
    ],
    ["Healthy False → True", [c("Healthy", "False", "A")], [c("Healthy", "True", "Ok")], []],
    [
      "Provisioned → Replacing",
      [c("Provisioned", "True", "Created")],
      [c("Provisioned", "False", "Replacing")],
      ["Proxy Instance Replaced"],
    ],
    [
      "Provisioned → Provisioning",
      [c("Provisioned", "True", "Created")],
      [c("Provisioned", "False", "Provisioning")],
      [],
    ],
  ])("Proxy: %s", (_, before, after, expected) => {
    expect(types(proxyStateChanges(obj(...before), obj(...after), AT))).toEqual(expected);
  });

  it.each([
    [
      "Ready → True",
      [c("Ready", "False", "StatefulSetNotReady")],
      [c("Ready", "True", "Ready")],
      ["SubPool Ready"],
    ],
    [
      "Ready → False/NamespaceConflict",
      [c("Ready", "Unknown", "Pending")],
      [c("Ready", "False", "NamespaceConflict")],
      ["SubPool Refused"],
    ],
    [
      "Ready → False/StatefulSetNotReady (waiting, not refused)",
      [c("Ready", "True", "Ready")],
      [c("Ready", "False", "StatefulSetNotReady")],
      [],
    ],
  ])("SubPool: %s", (_, before, after, expected) => {
    expect(types(subPoolStateChanges(obj(...before), obj(...after), AT))).toEqual(expected);
  });

  it.each([
    [
      "a component's status flips",
      [c("A", "True", "Ready")],
      [c("A", "False", "Failed")],
      ["Site Component Changed"],
    ],
    ["a component first appears (a new Site)", [], [c("A", "True", "Ready")], []],
    ["an unlisted condition changes", [c("B", "True", "x")], [c("B", "False", "y")], []],
  ])("Site: %s", (_, before, after, expected) => {
    expect(types(siteStateChanges(["A"])(obj(...before), obj(...after), AT))).toEqual(expected);
  });
});

describe("boundedStateChanges", () => {
  const change = proxyStateChanges(obj(c("Healthy", "True", "Ok")), obj(c("Healthy", "False", "X")), AT)[0]!;
  const setup = (sink: StateChangeSink, max: number) => {
    const counted: Record<string, number> = {};
    const warned: string[] = [];
    const bounded = boundedStateChanges(sink, {
      max,
      log: { info() {}, warn: (m) => warned.push(m), error() {} },
      metrics: {
        count: (name, labels, value = 1) => {
          const key = `${name}{${labels?.reason ?? labels?.type ?? ""}}`;
          counted[key] = (counted[key] ?? 0) + value;
        },
        observe() {},
        gauge() {},
      },
    });
    return { bounded, counted, warned };
  };

  it("publishes at most max changes per invocation, the rest dropped and counted", async () => {
    const sent: StateChange[] = [];
    const { bounded, counted } = setup({ publish: async (cs) => void sent.push(...cs) }, 3);
    await bounded.publish([change, change]);
    await bounded.publish([change, change]);
    await bounded.publish([change]);
    expect(sent).toHaveLength(3);
    expect(counted).toEqual({
      "kubefn_state_changes_total{Proxy Unhealthy}": 3,
      "kubefn_state_changes_dropped_total{bound}": 2,
    });
  });

  it("a failing sink is logged and counted, never thrown", async () => {
    const { bounded, counted, warned } = setup(
      {
        publish: async () => {
          throw new Error("down");
        },
      },
      10,
    );
    await expect(bounded.publish([change])).resolves.toBeUndefined();
    expect(counted).toEqual({ "kubefn_state_changes_dropped_total{failed}": 1 });
    expect(warned).toEqual(["state changes could not be published"]);
  });
});
