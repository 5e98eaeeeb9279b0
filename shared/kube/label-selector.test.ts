import { describe, expect, it } from "vitest";
import { matchesRequirements, parseLabelSelector } from "./label-selector.ts";

describe("parseLabelSelector", () => {
  it.each([
    ["", []],
    ["tier=fast", [{ key: "tier", operator: "In", values: ["fast"] }]],
    ["tier==fast", [{ key: "tier", operator: "In", values: ["fast"] }]],
    ["tier != slow", [{ key: "tier", operator: "NotIn", values: ["slow"] }]],
    ["region in (eu, us)", [{ key: "region", operator: "In", values: ["eu", "us"] }]],
    ["region notin (cn)", [{ key: "region", operator: "NotIn", values: ["cn"] }]],
    ["crawl.kubefn.dev/pool", [{ key: "crawl.kubefn.dev/pool", operator: "Exists" }]],
    ["!blocked", [{ key: "blocked", operator: "DoesNotExist" }]],
    [
      "a=,b in (x,y),!c",
      [
        { key: "a", operator: "In", values: [""] },
        { key: "b", operator: "In", values: ["x", "y"] },
        { key: "c", operator: "DoesNotExist" },
      ],
    ],
  ])("parses %j", (selector, requirements) => {
    expect(parseLabelSelector(selector)).toEqual({ ok: true, requirements });
  });

  it.each([
    ["a=b,,c"],
    ["a=b c"],
    ["a in ()"],
    ["a in (x"],
    ["=b"],
    ["a>1"],
    ["-a=b"],
    [`a=${"x".repeat(64)}`],
    ["UPPER.case/x=y"],
    ["a in (b c)"],
  ])("rejects %j", (selector) => {
    const parsed = parseLabelSelector(selector);
    expect(parsed.ok).toBe(false);
  });
});

describe("matchesRequirements", () => {
  const labels = { tier: "fast", region: "eu" };
  it.each([
    ["", true],
    ["tier=fast", true],
    ["tier=slow", false],
    ["tier!=slow", true],
    ["missing!=x", true],
    ["region in (eu,us)", true],
    ["region notin (eu)", false],
    ["missing notin (eu)", true],
    ["tier", true],
    ["missing", false],
    ["!missing", true],
    ["!tier", false],
    ["tier=fast,region=us", false],
  ])("%j on {tier: fast, region: eu} → %s", (selector, expected) => {
    const parsed = parseLabelSelector(selector);
    if (!parsed.ok) throw new Error(parsed.error);
    expect(matchesRequirements(labels, parsed.requirements)).toBe(expected);
  });

  it("treats missing labels as an empty map", () => {
    const parsed = parseLabelSelector("!a,b!=c");
    if (!parsed.ok) throw new Error(parsed.error);
    expect(matchesRequirements(undefined, parsed.requirements)).toBe(true);
  });
});

describe("selector keys that name Object's members", () => {
  it.each(["constructor", "__proto__", "toString", "hasOwnProperty"])(
    "%s exists only where the labels have it",
    (key) => {
      const parsed = parseLabelSelector(key);
      if (!parsed.ok) return; // refused as a key: as good
      expect(matchesRequirements({ app: "x" }, parsed.requirements)).toBe(false);
      expect(matchesRequirements({}, parsed.requirements)).toBe(false);
      const negated = parseLabelSelector(`!${key}`);
      if (negated.ok) expect(matchesRequirements({ app: "x" }, negated.requirements)).toBe(true);
    },
  );
});
