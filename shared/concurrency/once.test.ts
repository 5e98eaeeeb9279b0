import { describe, expect, it } from "vitest";
import { onceUntilFailure } from "./once.ts";

describe("onceUntilFailure", () => {
  it("builds once and shares the result, also between concurrent calls", async () => {
    let builds = 0;
    const get = onceUntilFailure(async (n: number) => {
      builds++;
      return n * 2;
    });
    expect(await Promise.all([get(1), get(5)])).toEqual([2, 2]);
    expect(await get(7)).toBe(2);
    expect(builds).toBe(1);
  });

  it("forgets a failed build, so the next call builds again", async () => {
    let builds = 0;
    const get = onceUntilFailure(async () => {
      builds++;
      if (builds === 1) throw new Error("cold start failed");
      return "ok";
    });
    await expect(get()).rejects.toThrow("cold start failed");
    expect(await get()).toBe("ok");
    expect(await get()).toBe("ok");
    expect(builds).toBe(2);
  });
});
