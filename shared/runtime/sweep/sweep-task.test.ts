import { describe, expect, it } from "vitest";
import { createSweepMemo } from "../core/index.ts";

describe("createSweepMemo", () => {
  it("reads a key once for every caller in its scope", async () => {
    const memo = createSweepMemo();
    let reads = 0;
    const read = async () => ++reads;
    expect(await Promise.all([memo.once("k", read), memo.once("k", read)])).toEqual([1, 1]);
    expect(await memo.once("k", read)).toBe(1);
    expect(await memo.once("other", read)).toBe(2);
  });

  it("reads again once an answer is older than maxAgeMs (an invocation's shared reads)", async () => {
    let now = 0;
    const memo = createSweepMemo(30_000, () => now);
    let reads = 0;
    const read = async () => ++reads;
    expect(await memo.once("k", read)).toBe(1);
    now = 30_000;
    expect(await memo.once("k", read)).toBe(1);
    now = 30_001;
    expect(await memo.once("k", read)).toBe(2);
  });

  it("does not keep a failed read: the next caller tries again", async () => {
    const memo = createSweepMemo();
    await expect(memo.once("k", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await memo.once("k", async () => "ok")).toBe("ok");
  });
});
