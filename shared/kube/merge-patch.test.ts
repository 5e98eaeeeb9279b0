import { describe, expect, it } from "vitest";
import { applyMergePatch, diffMergePatch, fieldsPatch, jsonEqual } from "./merge-patch.ts";

describe("applyMergePatch (RFC 7386 examples)", () => {
  it.each([
    { target: { a: "b" }, patch: { a: "c" }, expected: { a: "c" } },
    { target: { a: "b" }, patch: { b: "c" }, expected: { a: "b", b: "c" } },
    { target: { a: "b" }, patch: { a: null }, expected: {} },
    { target: { a: "b", b: "c" }, patch: { a: null }, expected: { b: "c" } },
    { target: { a: ["b"] }, patch: { a: "c" }, expected: { a: "c" } },
    { target: { a: "c" }, patch: { a: ["b"] }, expected: { a: ["b"] } },
    { target: { a: { b: "c" } }, patch: { a: { b: "d", c: null } }, expected: { a: { b: "d" } } },
    { target: { a: [{ b: "c" }] }, patch: { a: [1] }, expected: { a: [1] } },
    { target: ["a", "b"], patch: ["c", "d"], expected: ["c", "d"] },
    { target: { a: "b" }, patch: ["c"], expected: ["c"] },
    { target: { e: null }, patch: { a: 1 }, expected: { e: null, a: 1 } },
    { target: [1, 2], patch: { a: "b", c: null }, expected: { a: "b" } },
    { target: {}, patch: { a: { bb: { ccc: null } } }, expected: { a: { bb: {} } } },
  ])("$target + $patch", ({ target, patch, expected }) => {
    const before = structuredClone(target);
    expect(applyMergePatch(target, patch)).toEqual(expected);
    expect(target).toEqual(before);
  });
});

describe("diffMergePatch", () => {
  it.each([
    { observed: { a: 1 }, desired: { a: 1 }, expected: undefined },
    { observed: { a: 1, b: 2 }, desired: { b: 2, a: 1 }, expected: undefined },
    { observed: { a: 1 }, desired: { a: 2 }, expected: { a: 2 } },
    { observed: { a: 1, stale: 1 }, desired: { a: 1 }, expected: { stale: null } },
    { observed: { m: { x: 1, y: 2 } }, desired: { m: { x: 1, z: 3 } }, expected: { m: { y: null, z: 3 } } },
    { observed: { l: [1, 2] }, desired: { l: [1] }, expected: { l: [1] } },
    { observed: undefined, desired: { a: 1 }, expected: { a: 1 } },
    { observed: { a: 1 }, desired: undefined, expected: null },
  ])("$observed → $desired", ({ observed, desired, expected }) => {
    const patch = diffMergePatch(observed, desired);
    expect(patch).toEqual(expected);
    if (patch !== undefined && desired !== undefined)
      expect(applyMergePatch(observed, patch)).toEqual(desired);
  });
});

describe("fieldsPatch", () => {
  const observed = {
    metadata: { name: "svc" },
    spec: {
      type: "ClusterIP",
      clusterIP: "10.0.0.7",
      ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
      selector: { app: "proxy", stale: "x" },
    },
  };
  const paths = ["spec.type", "spec.ports", "spec.selector"];

  it.each([
    {
      name: "in sync",
      desired: {
        spec: { type: "ClusterIP", ports: observed.spec.ports, selector: { app: "proxy", stale: "x" } },
      },
      expected: null,
    },
    {
      name: "selector replaced whole, clusterIP untouched",
      desired: { spec: { type: "ClusterIP", ports: observed.spec.ports, selector: { app: "proxy" } } },
      expected: { spec: { selector: { stale: null } } },
    },
    {
      name: "ports changed",
      desired: {
        spec: {
          type: "ClusterIP",
          ports: [{ name: "http", port: 81, protocol: "TCP", targetPort: 8080 }],
          selector: observed.spec.selector,
        },
      },
      expected: { spec: { ports: [{ name: "http", port: 81, protocol: "TCP", targetPort: 8080 }] } },
    },
  ])("$name", ({ desired, expected }) => {
    const patch = fieldsPatch(observed, desired, paths);
    expect(patch).toEqual(expected);
    if (patch) {
      const next = applyMergePatch(observed, patch);
      expect(next.spec.clusterIP).toBe("10.0.0.7");
      expect(fieldsPatch(next, desired, paths)).toBeNull();
    }
  });

  it("jsonEqual ignores key order", () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(true);
  });
});
