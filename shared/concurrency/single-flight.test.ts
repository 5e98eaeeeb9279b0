import { describe, expect, it } from "vitest";
import { singleFlight } from "./single-flight.ts";

describe("singleFlight", () => {
  it("drops a call made while one runs, and runs again once it settled", async () => {
    const seen: string[] = [];
    let release!: () => void;
    const run = singleFlight(async (arg: string) => {
      seen.push(arg);
      if (arg === "first") await new Promise<void>((r) => (release = r));
    });
    const first = run("first");
    await run("dropped");
    release();
    await first;
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
