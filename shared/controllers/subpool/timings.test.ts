import { describe, expect, it } from "vitest";
import { defaultSubPoolTimings, waitingLook } from "./timings.ts";

const waiting = { status: "False", reason: "StatefulSetNotReady" };

describe("waitingLook: a pool waiting to become Ready sees it within seconds, at a bounded cost", () => {
  it.each([
    [0, 2],
    [3, 2],
    [8, 4],
    [30, 15],
    [100, 50],
    [118, 59],
    [120, undefined], // half the wait reaches the resync: the sweep's drift pass takes over
    [3600, undefined],
  ])("waiting for %i s → look again after %s s", (waited, after) => {
    expect(waitingLook(defaultSubPoolTimings, waiting, waited)).toBe(after);
  });

  it("a pool never ready costs 11 looks over under three minutes before the sweep takes over", () => {
    let waited = 0;
    let looks = 0;
    for (let next = waitingLook(defaultSubPoolTimings, waiting, waited); next !== undefined; looks++) {
      waited += next;
      next = waitingLook(defaultSubPoolTimings, waiting, waited);
    }
    expect(looks).toBe(11);
    expect(waited).toBeLessThan(180);
  });

  it.each([
    [{ status: "True", reason: "Ready" }],
    [{ status: "False", reason: "NamespaceConflict" }],
    [{ status: "False", reason: "ResourceEnvelopeExceeded" }],
  ])("no look of its own when Ready or blocked for another reason: %o", (ready) => {
    expect(waitingLook(defaultSubPoolTimings, ready, 0)).toBeUndefined();
  });
});
