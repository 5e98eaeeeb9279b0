import { describe, expect, it } from "vitest";
import { FakeKube } from "../../../test/support/fake-kube.ts";
import { ServerError } from "../../kube/errors.ts";
import { Resources } from "../../kube/index.ts";
import type { Log } from "../core/index.ts";
import { createSweepLease, type LeaseSighting, leaseStep, type ObservedLease } from "./sweep-lease.ts";

const held = (holder: string | undefined, version = "7", durationSeconds = 20): ObservedLease => ({
  holder,
  version,
  durationSeconds,
});

describe("leaseStep", () => {
  it.each<[string, ObservedLease | undefined, LeaseSighting | undefined, number, string]>([
    ["no Lease yet: create it", undefined, undefined, 0, "create"],
    ["ours: renew", held("me"), undefined, 0, "renew"],
    ["released (no holder): take it at once", held(undefined), undefined, 0, "take"],
    ["another's, first seen: wait", held("other"), undefined, 0, "wait"],
    [
      "another's, renewed since last seen: wait",
      held("other", "8"),
      { version: "7", atMs: 0 },
      60_000,
      "wait",
    ],
    [
      "another's, unchanged for less than its duration: wait",
      held("other"),
      { version: "7", atMs: 0 },
      19_999,
      "wait",
    ],
    ["another's, unchanged for its duration: take", held("other"), { version: "7", atMs: 0 }, 20_000, "take"],
  ])("%s", (_, observed, sighting, now, step) => {
    expect(leaseStep(observed, "me", sighting, now).step).toBe(step);
  });

  it("measures expiry from when this replica saw the version, never from the holder's renewTime", () => {
    // A holder whose clock runs an hour behind writes renewTimes an hour old: still not expired.
    const first = leaseStep(held("other", "9"), "me", undefined, 1_000_000);
    expect(first.sighting).toEqual({ version: "9", atMs: 1_000_000 });
    expect(leaseStep(held("other", "9"), "me", first.sighting, 1_010_000).step).toBe("wait");
  });
});

const quiet: Log = { info: () => undefined, warn: () => undefined, error: () => undefined };

function replicas() {
  const kube = new FakeKube();
  let now = 0;
  const lease = (holder: string) =>
    createSweepLease({
      kube,
      namespace: "kubefn-system",
      name: "kubefn-sweep",
      holder,
      durationSeconds: 20,
      log: quiet,
      nowMs: () => now,
    });
  return {
    kube,
    a: lease("a"),
    b: lease("b"),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("createSweepLease", () => {
  it("gives each period to one replica; the holder renews with one update and no read", async () => {
    const { kube, a, b, advance } = replicas();
    for (let period = 0; period < 5; period++) {
      const before = kube.calls.length;
      const holders = [await a.hold(), await b.hold()].filter(Boolean).length;
      expect(holders).toBe(1);
      if (period > 0) expect(kube.calls.slice(before).map((c) => c.method)).toEqual(["update", "get"]);
      advance(10_000);
    }
    expect(kube.stored(Resources.Lease, { namespace: "kubefn-system", name: "kubefn-sweep" })).toMatchObject({
      metadata: { labels: { "crawl.kubefn.dev/managed-by": "kubefn" } },
      spec: { holderIdentity: "a", leaseDurationSeconds: 20 },
    });
  });

  it("the standby takes over once the holder has not renewed for a lease duration", async () => {
    const { kube, a, b, advance } = replicas();
    expect(await a.hold()).toBe(true);
    expect(await b.hold()).toBe(false);
    // a is gone: b sees the same version for 20 s of its own clock.
    advance(10_000);
    expect(await b.hold()).toBe(false);
    advance(10_000);
    expect(await b.hold()).toBe(true);
    expect(kube.stored(Resources.Lease, { namespace: "kubefn-system", name: "kubefn-sweep" })).toMatchObject({
      spec: { holderIdentity: "b", leaseTransitions: 1 },
    });
    // a comes back: its guarded renew meets b's write, and it stands by.
    expect(await a.hold()).toBe(false);
    expect(a.holding).toBe(false);
  });

  it("a holder that cannot renew stops sweeping that period", async () => {
    const { kube, a } = replicas();
    expect(await a.hold()).toBe(true);
    kube.fail("update", new ServerError("etcd unavailable", { status: 503, reason: "ServiceUnavailable" }));
    expect(await a.hold()).toBe(false);
    expect(await a.hold()).toBe(true);
  });

  it("a released Lease is taken at the standby's next period", async () => {
    const { a, b } = replicas();
    expect(await a.hold()).toBe(true);
    expect(await b.hold()).toBe(false);
    await a.release();
    expect(await b.hold()).toBe(true);
    expect(await a.hold()).toBe(false);
  });
});
