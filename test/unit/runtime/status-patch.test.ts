import { describe, expect, it } from "vitest";
import { jsonEqual, mergePatchFor } from "../../../shared/runtime/status-patch.ts";

describe("jsonEqual", () => {
  it.each([
    [{ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }, true],
    [{ a: 1, x: undefined }, { a: 1 }, true],
    [[1, 2], [2, 1], false],
    [{ a: 1 }, { a: "1" }, false],
    [{ a: null }, { a: undefined }, false],
    [undefined, {}, false],
    [{ a: [] }, { a: {} }, false],
  ])("%j vs %j → %s", (a, b, equal) => {
    expect(jsonEqual(a, b)).toBe(equal);
    expect(jsonEqual(b, a)).toBe(equal);
  });
});

describe("mergePatchFor", () => {
  it.each([
    [{ a: 1 }, { a: 1 }, undefined],
    [{ a: 1, b: 2 }, { a: 1 }, { b: null }],
    [{ a: { x: 1, y: 2 } }, { a: { x: 1, y: 3 } }, { a: { y: 3 } }],
    [{ c: [{ t: "A" }] }, { c: [{ t: "A" }, { t: "B" }] }, { c: [{ t: "A" }, { t: "B" }] }],
    [undefined, { phase: "Ready" }, { phase: "Ready" }],
    [{ phase: "Ready" }, undefined, null],
    [{ a: "s" }, { a: { n: 1 } }, { a: { n: 1 } }],
  ])("%j → %j is %j", (before, after, patch) => {
    expect(mergePatchFor(before, after)).toEqual(patch);
  });
});
