import { describe, expect, it } from "vitest";
import { addFinalizer, hasFinalizer, removeFinalizer } from "./finalizers.ts";

const ours = "subrelay.example.com/finalizer";

describe("finalizers", () => {
  it.each([
    {
      list: undefined,
      has: false,
      afterAdd: [ours],
      addChanged: true,
      afterRemove: [],
      removeChanged: false,
    },
    { list: [], has: false, afterAdd: [ours], addChanged: true, afterRemove: [], removeChanged: false },
    {
      list: ["other"],
      has: false,
      afterAdd: ["other", ours],
      addChanged: true,
      afterRemove: ["other"],
      removeChanged: false,
    },
    { list: [ours], has: true, afterAdd: [ours], addChanged: false, afterRemove: [], removeChanged: true },
    {
      list: ["a", ours, "b"],
      has: true,
      afterAdd: ["a", ours, "b"],
      addChanged: false,
      afterRemove: ["a", "b"],
      removeChanged: true,
    },
  ])("$list", ({ list, has, afterAdd, addChanged, afterRemove, removeChanged }) => {
    const before = structuredClone(list);
    expect(hasFinalizer(list, ours)).toBe(has);
    expect(addFinalizer(list, ours)).toEqual({ finalizers: afterAdd, changed: addChanged });
    expect(removeFinalizer(list, ours)).toEqual({ finalizers: afterRemove, changed: removeChanged });
    expect(list).toEqual(before);
  });
});
