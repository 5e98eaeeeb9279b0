import { describe, expect, it } from "vitest";
import { formatMicroTime } from "../../../kube/index.ts";
import {
  canTakeOver,
  isExpired,
  leaseLabelValueFor,
  leaseNameFor,
  leaseSweepDecision,
  newLease,
  type ProxyLease,
  type ProxyState,
  parseMicroTime,
  renewed,
  takenOver,
} from "./lease.ts";

const proxy = { namespace: "crawl", name: "fast", uid: "uid-1" };
const t0 = new Date("2026-11-30T12:00:00Z");
const at = (seconds: number) => new Date(t0.getTime() + seconds * 1000);

function lease(spec: ProxyLease["spec"], ownerUid = "uid-1"): ProxyLease {
  const base = newLease({ ...proxy, uid: ownerUid }, "crawler-a", 30, t0);
  return { ...base, spec };
}
const held = lease({ holderIdentity: "crawler-a", leaseDurationSeconds: 30, renewTime: formatMicroTime(t0) });
const ready: ProxyState = { uid: "uid-1", ready: true };

describe("MicroTime", () => {
  it.each([
    [new Date("2006-01-02T15:04:05Z"), "2006-01-02T15:04:05.000000Z"],
    [new Date("2026-11-30T12:00:00.123Z"), "2026-11-30T12:00:00.123000Z"],
  ])("formats %s as %s", (date, text) => {
    expect(formatMicroTime(date)).toBe(text);
    expect(parseMicroTime(text)).toEqual(date);
  });

  it.each([
    ["2026-11-30T12:00:00.123456Z", "2026-11-30T12:00:00.123Z"],
    ["2026-11-30T12:00:00Z", "2026-11-30T12:00:00.000Z"],
    ["2026-11-30T13:00:00.5+01:00", "2026-11-30T12:00:00.500Z"],
  ])("parses %s", (text, iso) => {
    expect(parseMicroTime(text)?.toISOString()).toBe(iso);
  });

  it.each([[undefined], [""], ["yesterday"], ["2026-13-45T99:00:00Z"]])("rejects %j", (text) => {
    expect(parseMicroTime(text)).toBeUndefined();
  });
});

describe("isExpired", () => {
  it.each<[string, ProxyLease["spec"], Date, boolean]>([
    ["within its duration", held.spec, at(29), false],
    ["exactly at renewTime + duration", held.spec, at(30), true],
    ["after", held.spec, at(31), true],
    [
      "acquireTime when never renewed",
      { leaseDurationSeconds: 30, acquireTime: formatMicroTime(t0) },
      at(10),
      false,
    ],
    [
      "renewTime wins over acquireTime",
      { leaseDurationSeconds: 30, acquireTime: formatMicroTime(at(-100)), renewTime: formatMicroTime(t0) },
      at(10),
      false,
    ],
    ["no duration", { renewTime: formatMicroTime(t0) }, t0, true],
    ["no times", { leaseDurationSeconds: 30 }, t0, true],
    ["no spec", undefined, t0, true],
  ])("%s", (_, spec, now, expected) => {
    expect(isExpired({ spec }, now)).toBe(expected);
  });
});

describe("canTakeOver", () => {
  it.each<[string, ProxyLease, ProxyState, Date, string | undefined]>([
    ["held and Ready: no", held, ready, at(10), undefined],
    [
      "released (no holder)",
      lease({ leaseDurationSeconds: 30, renewTime: formatMicroTime(t0) }),
      ready,
      at(10),
      "Released",
    ],
    ["expired", held, ready, at(30), "Expired"],
    ["proxy gone", held, undefined, at(10), "ProxyGone"],
    ["proxy replaced (new UID)", held, { uid: "uid-2", ready: true }, at(10), "ProxyReplaced"],
    ["proxy not Ready", held, { uid: "uid-1", ready: false }, at(10), "ProxyNotReady"],
  ])("%s", (_, l, p, now, expected) => {
    expect(canTakeOver(l, p, now)).toBe(expected);
  });
});

describe("leaseSweepDecision", () => {
  it.each<[string, ProxyLease, ProxyState, Date, ReturnType<typeof leaseSweepDecision>]>([
    ["held", held, ready, at(10), { action: "keep", held: true }],
    ["just expired: kept for a late renewal", held, ready, at(45), { action: "keep", held: false }],
    ["expired for exactly its duration: kept", held, ready, at(60), { action: "keep", held: false }],
    [
      "expired for longer than its duration",
      held,
      ready,
      at(61),
      { action: "delete", reason: "ExpiredLongAgo" },
    ],
    [
      "malformed",
      lease({ holderIdentity: "x" }),
      ready,
      at(0),
      { action: "delete", reason: "ExpiredLongAgo" },
    ],
    ["proxy gone", held, undefined, at(10), { action: "delete", reason: "ProxyGone" }],
    [
      "proxy replaced",
      held,
      { uid: "uid-2", ready: true },
      at(10),
      { action: "delete", reason: "ProxyReplaced" },
    ],
    [
      "proxy not Ready",
      held,
      { uid: "uid-1", ready: false },
      at(10),
      { action: "delete", reason: "ProxyNotReady" },
    ],
  ])("%s", (_, l, p, now, expected) => {
    expect(leaseSweepDecision(l, p, now)).toEqual(expected);
  });
});

describe("names", () => {
  it.each([
    ["fast", "proxy-fast"],
    ["a".repeat(247), `proxy-${"a".repeat(247)}`],
  ])("leaseNameFor(%s)", (name, expected) => {
    expect(leaseNameFor(name)).toBe(expected);
  });

  it("cuts a name that would exceed 253 characters, keeping it unique and valid", () => {
    const long = `${"a".repeat(240)}.${"b".repeat(12)}`;
    const other = `${"a".repeat(240)}.${"c".repeat(12)}`;
    expect(leaseNameFor(long)).toHaveLength(253);
    expect(leaseNameFor(long)).not.toBe(leaseNameFor(other));
    expect(leaseNameFor(long)).toMatch(/^proxy-a+-[0-9a-f]{8}$/);
  });

  it.each([
    ["fast", "fast"],
    ["x".repeat(63), "x".repeat(63)],
  ])("leaseLabelValueFor(%s)", (name, expected) => {
    expect(leaseLabelValueFor(name)).toBe(expected);
  });

  it("hashes a label value over 63 characters", () => {
    const value = leaseLabelValueFor(`${"x".repeat(60)}.yyyyy`);
    expect(value.length).toBeLessThanOrEqual(63);
    expect(value).toMatch(/^x+-[0-9a-f]{8}$/);
  });
});

describe("lease objects", () => {
  it("newLease: labelled, owned (not controlled) by the Proxy, MicroTimes", () => {
    expect(newLease(proxy, "crawler-a", 30, t0)).toEqual({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "proxy-fast",
        namespace: "crawl",
        labels: { "crawl.kubefn.dev/managed-by": "kubefn", "crawl.kubefn.dev/proxy": "fast" },
        ownerReferences: [
          { apiVersion: "crawl.kubefn.dev/v1alpha1", kind: "Proxy", name: "fast", uid: "uid-1" },
        ],
      },
      spec: {
        holderIdentity: "crawler-a",
        leaseDurationSeconds: 30,
        acquireTime: "2026-11-30T12:00:00.000000Z",
        renewTime: "2026-11-30T12:00:00.000000Z",
        leaseTransitions: 0,
      },
    });
  });

  it("takenOver keeps the resourceVersion, counts a transition and re-points the owner", () => {
    const current = { ...held, metadata: { ...held.metadata, resourceVersion: "7" } };
    const next = takenOver(current, { ...proxy, uid: "uid-2" }, "crawler-b", 60, at(100));
    expect(next.metadata.resourceVersion).toBe("7");
    expect(next.metadata.ownerReferences?.map((r) => r.uid)).toEqual(["uid-2"]);
    expect(next.spec).toEqual({
      holderIdentity: "crawler-b",
      leaseDurationSeconds: 60,
      acquireTime: formatMicroTime(at(100)),
      renewTime: formatMicroTime(at(100)),
      leaseTransitions: 1,
    });
  });

  it("renewed moves renewTime only, and the duration when asked", () => {
    expect(renewed(held, at(20)).spec).toEqual({ ...held.spec, renewTime: formatMicroTime(at(20)) });
    expect(renewed(held, at(20), 90).spec?.leaseDurationSeconds).toBe(90);
  });
});
