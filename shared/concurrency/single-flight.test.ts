import { describe, expect, it } from "vitest";
import { singleFlight } from "./single-flight.ts";

describe("singleFlight", () => {
  it("joins a call made while one runs, and runs again once it settled", async () => {
    const seen: string[] = [];
    let release!: () => void;
    const run = singleFlight(async (arg: string) => {
      seen.push(arg);
      if (arg === "first") await new Promise<void>((r) => (release = r));
    });
    const first = run("first");
    const joined = run("joined");
    expect(run.running).toBe(first);
    expect(joined).toBe(first);
    release();
    await joined;
    expect(run.running).toBeUndefined();
    await run("third");
    expect(seen).toEqual(["first", "third"]);
  });

  it("runs again after a failed run", async () => {
    let calls = 0;
    const run = singleFlight(async () => {
      calls++;
      throw new Error("boom");
    });
    await expect(run(undefined)).rejects.toThrow("boom");
    await expect(run(undefined)).rejects.toThrow("boom");
    expect(calls).toBe(2);
  });
});
