import { describe, expect, it } from "vitest";
import { covers } from "./covers.ts";

describe("covers", () => {
  it.each<[string, unknown, unknown, boolean]>([
    ["live has extra server defaults", { a: 1, b: { c: "x" } }, { a: 1, b: { c: "x", d: "y" }, z: 3 }, true],
    ["changed scalar", { a: 1 }, { a: 2 }, false],
    ["missing field", { a: 1, b: 2 }, { a: 1 }, false],
    ["array elements compared as subsets", [{ a: 1 }], [{ a: 1, extra: true }], true],
    ["array of other length", [{ a: 1 }], [{ a: 1 }, { a: 2 }], false],
    ["array vs object", { a: [] }, { a: {} }, false],
    ["string vs number", { port: 80 }, { port: "80" }, false],
    ["undefined members are ignored", { a: 1, b: undefined }, { a: 1 }, true],
    ["quantities by value under requests", { requests: { cpu: "1" } }, { requests: { cpu: "1000m" } }, true],
    ["quantities strictly elsewhere", { cpu: "1" }, { cpu: "1000m" }, false],
  ])("%s → %s", (_name, desired, live, expected) => {
    expect(covers(live, desired)).toBe(expected);
  });
});
