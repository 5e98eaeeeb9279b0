import { describe, expect, it } from "vitest";
import { sharedInFlight } from "./shared-in-flight.ts";

describe("sharedInFlight", () => {
  it("shares a run with the calls made while it is in flight, and runs again once it settled", async () => {
    let runs = 0;
    let release!: (v: string) => void;
    const get = sharedInFlight(
      () => {
        runs++;
        return runs === 1 ? new Promise<string>((r) => (release = r)) : Promise.resolve(`run ${runs}`);
      },
      1_000,
      () => 0,
    );
    const first = get();
    expect(get()).toBe(first);
    release("run 1");
    expect(await first).toBe("run 1");
    expect(await get()).toBe("run 2");
    expect(runs).toBe(2);
  });

  it("runs again after a failed run", async () => {
    let runs = 0;
    const get = sharedInFlight(
      async () => {
        runs++;
        throw new Error("boom");
      },
      1_000,
      () => 0,
    );
    await expect(get()).rejects.toThrow("boom");
    await expect(get()).rejects.toThrow("boom");
    expect(runs).toBe(2);
  });

  it("a run that never settles is shared for maxAgeMs, then a call starts its own; the lost one settling late clears nothing", async () => {
    let t = 0;
    let runs = 0;
    let lateRelease!: (v: string) => void;
    let secondRelease!: (v: string) => void;
    const get = sharedInFlight(
      () => {
        runs++;
        return new Promise<string>((r) => {
          if (runs === 1) lateRelease = r;
          else secondRelease = r;
        });
      },
      1_000,
      () => t,
    );
    const lost = get();
    t = 999;
    expect(get()).toBe(lost);
    t = 1_000;
    const second = get();
    expect(second).not.toBe(lost);
    expect(runs).toBe(2);
    lateRelease("late");
    await lost;
    // The lost run's settling does not forget the run now in flight.
    expect(get()).toBe(second);
    secondRelease("second");
    expect(await second).toBe("second");
  });
});
