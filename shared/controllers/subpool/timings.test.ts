import { describe, expect, it } from "vitest";
import { defaultSubPoolTimings, waitingLook } from "./timings.ts";

const waiting = { status: "False", reason: "StatefulSetNotReady" };

describe("waitingLook: the fallback of a pool waiting to become Ready (its StatefulSet's status writes are events), at a bounded cost", () => {
  it.each([
    [0, 15],
    [3, 15],
    [15, 15],
    [30, 30],
    [59, 59],
    [60, undefined], // the wait reaches the resync: the sweep's drift pass takes over
    [3600, undefined],
  ])("waiting for %i s → look again after %s s", (waited, after) => {
    expect(waitingLook(defaultSubPoolTimings, waiting, waited)).toBe(after);
  });

  it("a pool never ready costs 3 looks over a minute before the sweep takes over (11 over three minutes before issue 33)", () => {
    let waited = 0;
    let looks = 0;
    for (let next = waitingLook(defaultSubPoolTimings, waiting, waited); next !== undefined; looks++) {
      waited += next;
      next = waitingLook(defaultSubPoolTimings, waiting, waited);
    }
    expect(looks).toBe(3);
    expect(waited).toBe(60);
  });

  it.each([
    [{ status: "True", reason: "Ready" }],
    [{ status: "False", reason: "NamespaceConflict" }],
    [{ status: "False", reason: "ResourceEnvelopeExceeded" }],
  ])("no look of its own when Ready or blocked for another reason: %o", (ready) => {
    expect(waitingLook(defaultSubPoolTimings, ready, 0)).toBeUndefined();
  });
});
