import { describe, expect, it } from "vitest";
import { canonicalJson, specHash } from "./spec-hash.ts";

describe("canonicalJson", () => {
  it.each([
    {
      value: { b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } },
      expected: '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    },
    { value: { a: undefined, b: 1 }, expected: '{"b":1}' },
    { value: [undefined, 1], expected: "[null,1]" },
    { value: "x", expected: '"x"' },
    { value: undefined, expected: "null" },
  ])("$expected", ({ value, expected }) => {
    expect(canonicalJson(value)).toBe(expected);
  });
});

describe("specHash", () => {
  it("is SHA-256 hex of the canonical JSON", async () => {
    // sha256('{"a":1}')
    expect(await specHash({ a: 1 })).toBe("015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862");
  });

  it.each([
    { a: { region: "eu", size: "s", tags: ["x", "y"] }, b: { tags: ["x", "y"], size: "s", region: "eu" } },
    { a: { spec: { b: 1, a: 2 }, extra: undefined }, b: { spec: { a: 2, b: 1 } } },
  ])("ignores key order and undefined members: %#", async ({ a, b }) => {
    expect(await specHash(a)).toBe(await specHash(b));
  });

  it.each([
    { a: { tags: ["x", "y"] }, b: { tags: ["y", "x"] } },
    { a: { size: "s" }, b: { size: "m" } },
    { a: { a: null }, b: {} },
  ])("differs when the data differs: %#", async ({ a, b }) => {
    expect(await specHash(a)).not.toBe(await specHash(b));
  });
});
