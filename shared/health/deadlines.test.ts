import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sharedTimer } from "./deadlines.ts";

describe("sharedTimer", () => {
  beforeEach(() => {
    vi.useFakeTimers({
      now: new Date("2026-12-04T12:00:00Z"),
      toFake: ["setTimeout", "clearTimeout", "Date"],
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("calls each deadline at its own time, never early, and not once cancelled", () => {
    const timer = sharedTimer();
    const fired: string[] = [];
    timer(300, () => fired.push("300"));
    const cancel = timer(100, () => fired.push("100, cancelled"));
    timer(200, () => fired.push("200"));
    timer(200, () => fired.push("200 again"));
    cancel();
    vi.advanceTimersByTime(199);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(["200", "200 again"]);
    timer(50, () => fired.push("50 from 200"));
    vi.advanceTimersByTime(50);
    expect(fired).toEqual(["200", "200 again", "50 from 200"]);
    vi.advanceTimersByTime(49);
    expect(fired).toHaveLength(3);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(["200", "200 again", "50 from 200", "300"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("keeps one timer for many deadlines, and none once every deadline is cancelled", () => {
    const timer = sharedTimer();
    const cancels = Array.from({ length: 100 }, (_, i) => timer(5000 + i, () => {}));
    expect(vi.getTimerCount()).toBe(1);
    for (const cancel of cancels) cancel();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a deadline armed from an expiring one, and an expired one cancelled, are handled", () => {
    const timer = sharedTimer();
    const fired: number[] = [];
    const first = timer(10, () => {
      fired.push(10);
      timer(0, () => fired.push(0));
    });
    vi.advanceTimersByTime(10);
    first(); // cancelling what already fired changes nothing
    vi.advanceTimersByTime(0);
    expect(fired).toEqual([10, 0]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
