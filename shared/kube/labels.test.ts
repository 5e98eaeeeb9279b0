import { describe, expect, it } from "vitest";
import { formatLabelSelector, type LabelSelector, labelsMatch, mergeLabels } from "./labels.ts";

type Labels = Record<string, string> | undefined;

describe("mergeLabels", () => {
  it.each<{ name: string; existing: Labels; ours: Labels; labels: Labels; changed: boolean }>([
    { name: "none yet", existing: undefined, ours: { a: "1" }, labels: { a: "1" }, changed: true },
    {
      name: "keeps others' keys",
      existing: { x: "9" },
      ours: { a: "1" },
      labels: { x: "9", a: "1" },
      changed: true,
    },
    {
      name: "overrides ours",
      existing: { a: "0", x: "9" },
      ours: { a: "1" },
      labels: { a: "1", x: "9" },
      changed: true,
    },
    {
      name: "already there",
      existing: { a: "1", x: "9" },
      ours: { a: "1" },
      labels: { a: "1", x: "9" },
      changed: false,
    },
    { name: "nothing of ours", existing: { x: "9" }, ours: undefined, labels: { x: "9" }, changed: false },
  ])("$name", ({ existing, ours, labels, changed }) => {
    expect(mergeLabels(existing, ours)).toEqual({ labels, changed });
  });
});

describe("labelsMatch", () => {
  it.each<{ labels: Labels; wanted: Record<string, string>; expected: boolean }>([
    { labels: { a: "1", b: "2" }, wanted: { a: "1" }, expected: true },
    { labels: { a: "1" }, wanted: { a: "1", b: "2" }, expected: false },
    { labels: { a: "2" }, wanted: { a: "1" }, expected: false },
    { labels: undefined, wanted: {}, expected: true },
    { labels: undefined, wanted: { a: "1" }, expected: false },
  ])("$labels ⊇ $wanted = $expected", ({ labels, wanted, expected }) => {
    expect(labelsMatch(labels, wanted)).toBe(expected);
  });
});

describe("formatLabelSelector", () => {
  it.each<{ selector: LabelSelector | Record<string, string>; expected: string }>([
    { selector: { b: "2", a: "1" }, expected: "a=1,b=2" },
    { selector: {}, expected: "" },
    {
      selector: { matchLabels: { "app.kubernetes.io/name": "proxy" } },
      expected: "app.kubernetes.io/name=proxy",
    },
    {
      selector: {
        matchLabels: { tier: "edge" },
        matchExpressions: [
          { key: "env", operator: "In", values: ["prod", "dev"] },
          { key: "zone", operator: "NotIn", values: ["z1"] },
          { key: "managed", operator: "Exists" },
          { key: "legacy", operator: "DoesNotExist" },
        ],
      },
      expected: "tier=edge,env in (dev,prod),zone notin (z1),managed,!legacy",
    },
  ])("$expected", ({ selector, expected }) => {
    expect(formatLabelSelector(selector)).toBe(expected);
  });
});
