import { afterEach, describe, expect, it, vi } from "vitest";
import { startSweeper } from "./sweeper.ts";

const quietLog = () => ({ info: vi.fn(), warn: vi.fn(), error: vi.fn() });

describe("startSweeper", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("sweeps everything at once, then once a period; a failed sweep is logged and the next one runs", async () => {
    vi.useFakeTimers();
    const runs: boolean[] = [];
    const log = quietLog();
    const sweeper = startSweeper(
      async (full) => {
        runs.push(full);
        if (runs.length === 2) throw new Error("list failed");
      },
      10,
      log,
    );
    expect(runs).toEqual([true]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.error).toHaveBeenCalledWith("sweep failed", { error: "Error: list failed" });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(runs).toEqual([true, false, false]);
    await sweeper.stop();
    await vi.advanceTimersByTimeAsync(30_000);
    expect(runs).toHaveLength(3);
  });

  it("the full sweep is tried again until one ran: held back (admission gate closed) or failed does not count", async () => {
    vi.useFakeTimers();
    const runs: boolean[] = [];
    const answers = [{ heldBack: true }, new Error("list failed"), {}, {}];
    const sweeper = startSweeper(
      async (full) => {
        runs.push(full);
        const answer = answers[runs.length - 1];
        if (answer instanceof Error) throw answer;
        return answer;
      },
      10,
      quietLog(),
    );
    await vi.advanceTimersByTimeAsync(30_000);
    expect(runs).toEqual([true, true, true, false]);
    await sweeper.stop();
  });

  it("stop waits for the sweep in flight", async () => {
    let release!: () => void;
    let finished = false;
    const sweeper = startSweeper(
      async () => {
        await new Promise<void>((r) => (release = r));
        finished = true;
      },
      60,
      quietLog(),
    );
    const stopped = sweeper.stop();
    release();
    await stopped;
    expect(finished).toBe(true);
  });
});

describe("startSweeper with a lease", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("sweeps only in the periods it holds the lease, full the first time, and releases it at stop", async () => {
    vi.useFakeTimers();
    const runs: boolean[] = [];
    const answers = [false, false, true, true, false, true];
    const lease = {
      hold: vi.fn(async () => answers.shift() ?? false),
      release: vi.fn(async () => undefined),
    };
    const sweeper = startSweeper(
      async (full) => {
        runs.push(full);
      },
      10,
      quietLog(),
      lease,
    );
    await vi.advanceTimersByTimeAsync(50_000);
    expect(lease.hold).toHaveBeenCalledTimes(6);
    expect(runs).toEqual([true, false, false]);
    await sweeper.stop();
    expect(lease.release).toHaveBeenCalledTimes(1);
  });
});
