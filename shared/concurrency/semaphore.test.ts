import { describe, expect, it } from "vitest";
import { semaphore } from "./semaphore.ts";

describe("semaphore", () => {
  it("holds at most `limit` calls in flight, in arrival order, and frees a slot when a call throws", async () => {
    const slots = semaphore(2);
    let inFlight = 0;
    let peak = 0;
    const order: number[] = [];
    const call = (i: number) =>
      slots.run(async () => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        order.push(i);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        if (i === 1) throw new Error("boom");
        return i;
      });
    const results = await Promise.allSettled([0, 1, 2, 3, 4].map(call));
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
      "fulfilled",
    ]);
  });

  it("leaves the slot to others while a caller waits between two calls", async () => {
    const slots = semaphore(1);
    const seen: string[] = [];
    let resume!: () => void;
    const paused = new Promise<void>((r) => (resume = r));
    const first = (async () => {
      await slots.run(async () => seen.push("a1"));
      await paused;
      await slots.run(async () => seen.push("a2"));
    })();
    await slots.run(async () => seen.push("b"));
    resume();
    await first;
    expect(seen).toEqual(["a1", "b", "a2"]);
  });
});
