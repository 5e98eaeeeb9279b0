import { describe, expect, it } from "vitest";
import { chooseFault, type FaultPlan, faultKinds, parseFaultPlan } from "../../support/fault-proxy.ts";

function counter(plan: FaultPlan, n: number, method = "GET", path = "/api/v1/pods") {
  let seed = 7;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return (seed - 1) / 2147483646;
  };
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const f = chooseFault(plan, method, path, random) ?? "none";
    counts.set(f, (counts.get(f) ?? 0) + 1);
  }
  return counts;
}

describe("chooseFault", () => {
  it("faults about `rate` of matching requests", () => {
    const counts = counter({ rate: 0.2 }, 10_000);
    const faulted = 10_000 - (counts.get("none") ?? 0);
    expect(faulted).toBeGreaterThan(1800);
    expect(faulted).toBeLessThan(2200);
    for (const kind of faultKinds) expect(counts.get(kind) ?? 0).toBeGreaterThan(150);
  });

  it.each([
    ["rate 0 never faults", { rate: 0 }, "GET", 0],
    ["a method outside `methods` is never faulted", { rate: 1, methods: ["POST"] }, "GET", 0],
    ["a path outside `pathPattern` is never faulted", { rate: 1, pathPattern: "/secrets" }, "GET", 0],
    ["rate 1 faults every matching request", { rate: 1, methods: ["GET"] }, "GET", 100],
    ["an all-zero mix never faults", { rate: 1, mix: { "503": 0 } }, "GET", 0],
  ] as const)("%s", (_, plan, method, expected) => {
    const counts = counter(plan as FaultPlan, 100, method);
    expect(100 - (counts.get("none") ?? 0)).toBe(expected);
  });

  it("chooses only the kinds in `mix`", () => {
    const counts = counter({ rate: 1, mix: { lost: 1, "429": 3 } }, 1000);
    expect([...counts.keys()].sort()).toEqual(["429", "lost"]);
    expect(counts.get("429")!).toBeGreaterThan(counts.get("lost")! * 2);
  });
});

describe("parseFaultPlan", () => {
  it("accepts a full plan", () => {
    const plan = {
      rate: 0.5,
      mix: { "503": 1, slow: 2 },
      methods: ["PATCH"],
      pathPattern: "/proxies",
      retryAfterSeconds: 3,
      slowMs: 100,
      seed: 9,
    };
    expect(parseFaultPlan(plan)).toEqual(plan);
  });

  it.each([
    [null, "JSON object"],
    [{ rate: 2 }, "rate"],
    [{ rate: 0.1, mix: { teapot: 1 } }, "unknown fault kind teapot"],
    [{ rate: 0.1, methods: ["TRACE"] }, "methods"],
    [{ rate: 0.1, pathPattern: "(" }, "Invalid regular expression"],
    [{ rate: 0.1, slowMs: -1 }, "slowMs"],
  ])("rejects %j", (plan, message) => {
    expect(() => parseFaultPlan(plan)).toThrow(message);
  });
});
