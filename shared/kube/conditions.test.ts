import { describe, expect, it } from "vitest";
import {
  type Condition,
  type ConditionInput,
  findCondition,
  formatKubeTime,
  isTrue,
  removeCondition,
  setCondition,
} from "./conditions.ts";

const earlier = "2024-05-01T10:00:00Z";
const now = new Date("2024-05-01T12:34:56.789Z");
const nowText = "2024-05-01T12:34:56Z";

const ready: Condition = {
  type: "Ready",
  status: "True",
  reason: "Available",
  message: "proxy answers",
  observedGeneration: 3,
  lastTransitionTime: earlier,
};
const degraded: Condition = {
  type: "Degraded",
  status: "False",
  reason: "AsExpected",
  message: "",
  lastTransitionTime: earlier,
};

describe("setCondition", () => {
  it.each<{
    name: string;
    existing: Condition[] | undefined;
    next: ConditionInput;
    changed: boolean;
    expected: Condition;
  }>([
    {
      name: "appends to no conditions",
      existing: undefined,
      next: { type: "Ready", status: "False", reason: "Provisioning", message: "" },
      changed: true,
      expected: {
        type: "Ready",
        status: "False",
        reason: "Provisioning",
        message: "",
        lastTransitionTime: nowText,
      },
    },
    {
      name: "identical → unchanged, time kept",
      existing: [ready, degraded],
      next: {
        type: "Ready",
        status: "True",
        reason: "Available",
        message: "proxy answers",
        observedGeneration: 3,
      },
      changed: false,
      expected: ready,
    },
    {
      name: "reason changes, status same → replaced, time kept",
      existing: [ready],
      next: {
        type: "Ready",
        status: "True",
        reason: "Recovered",
        message: "proxy answers",
        observedGeneration: 3,
      },
      changed: true,
      expected: { ...ready, reason: "Recovered" },
    },
    {
      name: "message changes → replaced, time kept",
      existing: [ready],
      next: { type: "Ready", status: "True", reason: "Available", message: "ok", observedGeneration: 3 },
      changed: true,
      expected: { ...ready, message: "ok" },
    },
    {
      name: "observedGeneration changes → replaced, time kept",
      existing: [ready],
      next: {
        type: "Ready",
        status: "True",
        reason: "Available",
        message: "proxy answers",
        observedGeneration: 4,
      },
      changed: true,
      expected: { ...ready, observedGeneration: 4 },
    },
    {
      name: "status flips → time moves",
      existing: [ready],
      next: {
        type: "Ready",
        status: "False",
        reason: "Unhealthy",
        message: "3 probes failed",
        observedGeneration: 3,
      },
      changed: true,
      expected: {
        type: "Ready",
        status: "False",
        reason: "Unhealthy",
        message: "3 probes failed",
        observedGeneration: 3,
        lastTransitionTime: nowText,
      },
    },
    {
      name: "observedGeneration dropped → removed",
      existing: [ready],
      next: { type: "Ready", status: "True", reason: "Available", message: "proxy answers" },
      changed: true,
      expected: {
        type: "Ready",
        status: "True",
        reason: "Available",
        message: "proxy answers",
        lastTransitionTime: earlier,
      },
    },
  ])("$name", ({ existing, next, changed, expected }) => {
    const before = structuredClone(existing);
    const result = setCondition(existing, next, now);
    expect(result.changed).toBe(changed);
    expect(findCondition(result.conditions, next.type)).toEqual(expected);
    expect(existing).toEqual(before);
  });

  it("keeps other conditions and their order", () => {
    const { conditions } = setCondition(
      [ready, degraded],
      { type: "Ready", status: "False", reason: "X", message: "" },
      now,
    );
    expect(conditions.map((c) => c.type)).toEqual(["Ready", "Degraded"]);
    expect(conditions[1]).toBe(degraded);
  });
});

describe("removeCondition", () => {
  it.each([
    { type: "Ready", changed: true, left: ["Degraded"] },
    { type: "Missing", changed: false, left: ["Ready", "Degraded"] },
  ])("$type", ({ type, changed, left }) => {
    const result = removeCondition([ready, degraded], type);
    expect(result.changed).toBe(changed);
    expect(result.conditions.map((c) => c.type)).toEqual(left);
  });
});

describe("isTrue / findCondition / formatKubeTime", () => {
  it.each([
    { conditions: [ready], type: "Ready", expected: true },
    { conditions: [degraded], type: "Degraded", expected: false },
    { conditions: undefined, type: "Ready", expected: false },
  ])("isTrue($type) = $expected", ({ conditions, type, expected }) => {
    expect(isTrue(conditions, type)).toBe(expected);
  });

  it("formats whole seconds, as metav1.Time does", () => {
    expect(formatKubeTime(now)).toBe(nowText);
  });
});

describe("bounded condition messages", () => {
  it("a 40 kB message (a tenant's probe URL) is cut to what the API accepts, stably", () => {
    const url = `http://probe.example/${"a".repeat(40_000)}`;
    const now = new Date("2026-11-30T12:00:00Z");
    const first = setCondition(
      undefined,
      { type: "Healthy", status: "False", reason: "ProbeFailed", message: `GET ${url} failed` },
      now,
    );
    const message = first.conditions[0]!.message;
    expect(Array.from(message).length).toBeLessThanOrEqual(2048);
    expect(message.endsWith("…")).toBe(true);
    // The same long input again is no change (steady state writes nothing).
    const again = setCondition(
      first.conditions,
      { type: "Healthy", status: "False", reason: "ProbeFailed", message: `GET ${url} failed` },
      now,
    );
    expect(again.changed).toBe(false);
  });
});
