import { describe, expect, it } from "vitest";
import { withSummary } from "../../crd/index.ts";
import type { Condition, KubeObject } from "../../kube/index.ts";
import { applyReadiness, type Readiness, readinessDiffers, SummaryConditionType } from "./readiness.ts";

const earlier = "2026-11-30T11:00:00Z";
const now = new Date("2026-11-30T12:00:00Z");

function object(generation: number, conditions: Condition[] = []): KubeObject {
  return {
    apiVersion: "example.com/v1",
    kind: "Thing",
    metadata: { name: "t", generation },
    status: { conditions },
  };
}

const cond = (type: string, status: Condition["status"], reason: string, generation = 1): Condition => ({
  type,
  status,
  reason,
  message: "m",
  observedGeneration: generation,
  lastTransitionTime: earlier,
});

/** `Type=Status/Reason@generation` per condition, in order. */
const summary = (o: KubeObject) =>
  ((o.status as { conditions?: Condition[] }).conditions ?? []).map(
    (c) => `${c.type}=${c.status}/${c.reason}@${c.observedGeneration ?? "-"}`,
  );

const ready = (progress: Readiness["progress"], status: Condition["status"] = "False"): Readiness => ({
  status,
  reason: "Why",
  message: "m",
  progress,
});

describe("applyReadiness", () => {
  it.each<[string, Condition[], Readiness, string[]]>([
    ["a first summary, settled and ready", [], ready("settled", "True"), ["Ready=True/Why@2"]],
    [
      "reconciling adds Reconciling=True",
      [],
      ready("reconciling"),
      ["Ready=False/Why@2", "Reconciling=True/Why@2"],
    ],
    ["stalled adds Stalled=True", [], ready("stalled"), ["Ready=False/Why@2", "Stalled=True/Why@2"]],
    [
      "reconciling → stalled swaps the abnormal-true condition",
      [cond("Ready", "False", "Why"), cond("Reconciling", "True", "Why")],
      ready("stalled"),
      ["Ready=False/Why@2", "Stalled=True/Why@2"],
    ],
    [
      "stalled → ready removes Stalled",
      [cond("Ready", "False", "Why"), cond("Stalled", "True", "Why")],
      ready("settled", "True"),
      ["Ready=True/Why@2"],
    ],
    [
      "other conditions are left where they are",
      [cond("Healthy", "True", "ProbeSucceeded"), cond("Ready", "False", "Old")],
      ready("settled", "True"),
      ["Healthy=True/ProbeSucceeded@1", "Ready=True/Why@2"],
    ],
  ])("%s", (_name, conditions, readiness, want) => {
    const o = object(2, conditions);
    expect(applyReadiness(o, readiness, now)).toBe(true);
    expect(summary(o)).toEqual(want);
  });

  it("writes nothing when the summary says the same (steady state)", () => {
    const o = object(2);
    applyReadiness(o, ready("reconciling"), now);
    const before = structuredClone(o);
    expect(applyReadiness(o, ready("reconciling"), new Date("2026-11-30T13:00:00Z"))).toBe(false);
    expect(o).toEqual(before);
  });

  it("moves lastTransitionTime only when Ready's status flips", () => {
    const o = object(2, [cond("Ready", "False", "Provisioning")]);
    applyReadiness(o, { ...ready("reconciling"), reason: "Replacing" }, now);
    const readyOf = () =>
      (o.status as { conditions: Condition[] }).conditions.find((c) => c.type === "Ready");
    expect(readyOf()?.lastTransitionTime).toBe(earlier);
    applyReadiness(o, ready("settled", "True"), now);
    expect(readyOf()?.lastTransitionTime).toBe("2026-11-30T12:00:00Z");
  });

  it("creates status when the object has none", () => {
    const o: KubeObject = { apiVersion: "v1", kind: "Thing", metadata: { name: "t" } };
    applyReadiness(o, ready("settled", "True"), now);
    expect(summary(o)).toEqual(["Ready=True/Why@-"]);
  });
});

describe("readinessDiffers", () => {
  it.each<[string, Condition[], boolean]>([
    ["no summary yet", [], true],
    [
      "the same summary at this generation",
      [cond("Ready", "False", "Why", 2), cond("Reconciling", "True", "Why", 2)],
      false,
    ],
    [
      "the same summary of an older generation",
      [cond("Ready", "False", "Why", 1), cond("Reconciling", "True", "Why", 1)],
      true,
    ],
    [
      "a stale Stalled left behind",
      [
        cond("Ready", "False", "Why", 2),
        cond("Reconciling", "True", "Why", 2),
        cond("Stalled", "True", "Why", 2),
      ],
      true,
    ],
  ])("%s → %s", (_name, conditions, want) => {
    const o = object(2, conditions);
    const before = structuredClone(o);
    expect(readinessDiffers(o, ready("reconciling"))).toBe(want);
    expect(o).toEqual(before);
  });
});

it("the CRDs document the summary's condition types", () => {
  expect(withSummary(["Ready", "Healthy"])).toEqual([
    "Ready",
    "Healthy",
    ...Object.values(SummaryConditionType).slice(1),
  ]);
  expect(withSummary([])).toEqual(Object.values(SummaryConditionType));
});
