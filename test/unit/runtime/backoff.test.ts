import { describe, expect, it } from "vitest";
import { backoffSeconds } from "../../../shared/runtime/index.ts";

const fixed = (r: number) => () => r;

describe("backoffSeconds", () => {
  it.each([
    // attempt, random, policy, expected
    [0, 0, {}, 1], // step 1, equal jitter floor 0.5 → rounded up to 1
    [0, 0.999, {}, 1],
    [1, 0, {}, 1], // step 2 → 1
    [1, 0.999, {}, 2],
    [3, 0, {}, 4], // step 8 → [4, 8]
    [3, 0.5, {}, 6],
    [3, 0.999, {}, 8],
    [8, 0, {}, 128], // step 256
    [9, 0, {}, 150], // step capped at 300 → [150, 300]
    [9, 0.999, {}, 300],
    [50, 0.5, {}, 225],
    [1000, 0.5, {}, 225], // no overflow
    [-3, 0.5, {}, 1], // negative attempt treated as 0
    [Number.NaN, 0.5, {}, 1],
    [3, 0, { jitter: "full" as const }, 0],
    [3, 0.5, { jitter: "full" as const }, 4],
    [3, 0.5, { retryAfter: 30 }, 30], // Retry-After is a floor
    [3, 0.5, { retryAfter: 2 }, 6], // below the jittered delay: no effect
    [12, 0.5, { retryAfter: 900 }, 900], // a floor beats the cap
    [2, 0.5, { base: 5, factor: 3, cap: 40 }, 30], // step 45 capped at 40 → 20 + 10
  ])("attempt %s, random %s, %o → %s s", (attempt, random, policy, expected) => {
    expect(backoffSeconds(attempt, fixed(random), policy)).toBe(expected);
  });

  it("stays within [step/2, step] for every attempt under equal jitter", () => {
    for (let attempt = 0; attempt < 20; attempt++) {
      const step = Math.min(300, 2 ** attempt);
      for (const r of [0, 0.25, 0.5, 0.75, 0.9999]) {
        const s = backoffSeconds(attempt, fixed(r));
        expect(s).toBeGreaterThanOrEqual(Math.ceil(step / 2));
        expect(s).toBeLessThanOrEqual(Math.ceil(step));
      }
    }
  });
});
