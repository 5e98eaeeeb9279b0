import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../../shared/runtime/core/index.ts";
import { planSweep, sweepBucket } from "../../../shared/runtime/sweep/index.ts";

/** Deterministic v4-shaped UIDs (mulberry32), so the property test is reproducible. */
function uids(count: number, seed = 42): string[] {
  let a = seed;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0).toString(16).padStart(8, "0");
  };
  return Array.from({ length: count }, () => {
    const h = next() + next() + next() + next();
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
  });
}

const objects = (ids: string[]): KubeObject[] =>
  ids.map((uid, i) => ({
    apiVersion: "v1",
    kind: "X",
    metadata: { name: `o${i}`, namespace: `ns${i % 7}`, uid },
  }));

describe("planSweep", () => {
  it.each([
    [600, 10],
    [1800, 30],
    [3600, 60],
    [90, 2],
  ])(
    "visits each of 10,000 objects exactly once per interval (resync %s s, %s buckets)",
    (resyncSeconds, buckets) => {
      const list = objects(uids(10_000));
      const start = Date.parse("2026-11-30T12:07:00Z"); // not aligned to the interval on purpose
      const visits = new Map<string, number>();
      const sizes: number[] = [];
      for (let minute = 0; minute < buckets; minute++) {
        const plan = planSweep({
          controller: "proxy",
          objects: list,
          now: new Date(start + minute * 60_000 + 17_000),
          resyncSeconds,
          shardSize: 100,
        });
        expect(plan.buckets).toBe(buckets);
        sizes.push(plan.due.length);
        for (const r of plan.due)
          visits.set(`${r.namespace}/${r.name}`, (visits.get(`${r.namespace}/${r.name}`) ?? 0) + 1);
      }
      expect(visits.size).toBe(10_000);
      expect([...visits.values()].every((n) => n === 1)).toBe(true);

      const mean = 10_000 / buckets;
      const max = Math.max(...sizes);
      // Binomial spread: a bucket holds mean ± sqrt(mean). Within 5 % where buckets hold ~1,000,
      // within 4 standard deviations otherwise (~167 per bucket for an hourly resync).
      const bound = Math.max(mean * 1.05, mean + 4 * Math.sqrt(mean));
      expect(max).toBeLessThanOrEqual(bound);
    },
  );

  // Regression: buckets were wall-clock minutes, so a sweep every 2 minutes over a 4-minute resync
  // only ever reached the even buckets and half the objects were never swept.
  it.each([
    [120, 480, 4],
    [300, 600, 2],
    [3600, 3600, 1],
  ])(
    "a sweep every %s s over a %s s resync reaches every object exactly once per %s sweeps",
    (period, resyncSeconds, sweeps) => {
      const list = objects(uids(2_000));
      const start = Date.parse("2026-11-30T12:00:00Z");
      const visits = new Map<string, number>();
      for (let i = 0; i < sweeps; i++) {
        const plan = planSweep({
          controller: "proxy",
          objects: list,
          now: new Date(start + i * period * 1000 + 3_000),
          resyncSeconds,
          shardSize: 100,
          periodSeconds: period,
        });
        expect(plan.buckets).toBe(sweeps);
        for (const r of plan.due)
          visits.set(`${r.namespace}/${r.name}`, (visits.get(`${r.namespace}/${r.name}`) ?? 0) + 1);
      }
      expect(visits.size).toBe(2_000);
      expect([...visits.values()].every((n) => n === 1)).toBe(true);
    },
  );

  it("keeps a 10-bucket spread within a few percent of the mean", () => {
    const counts = new Array(10).fill(0) as number[];
    for (const uid of uids(10_000, 7)) counts[sweepBucket(uid, 10)]!++;
    expect(Math.max(...counts) / 1000).toBeLessThan(1.06);
    expect(Math.min(...counts) / 1000).toBeGreaterThan(0.94);
  });

  it("is stable: the same UID lands in the same minute every interval", () => {
    const [uid] = uids(1);
    const list = objects([uid!]);
    const dueMinutes = (from: number) =>
      Array.from({ length: 30 }, (_, m) => m).filter(
        (m) =>
          planSweep({
            controller: "c",
            objects: list,
            now: new Date(from + m * 60_000),
            resyncSeconds: 600,
            shardSize: 10,
          }).due.length === 1,
      );
    const t0 = Date.parse("2026-11-30T00:00:00Z");
    expect(dueMinutes(t0)).toHaveLength(3);
    const [a, b, c] = dueMinutes(t0);
    expect([b! - a!, c! - b!]).toEqual([10, 10]);
  });

  it("chunks due requests into shards of keys, never the listed bodies", () => {
    const list = objects(uids(1000));
    const now = new Date("2026-11-30T12:00:00Z");
    const plan = planSweep({
      controller: "subpool",
      objects: list,
      now,
      resyncSeconds: 60,
      shardSize: 300,
    });
    expect(plan.buckets).toBe(1);
    expect(plan.due).toHaveLength(1000);
    expect(plan.shards.map((s) => s.length)).toEqual([300, 300, 300, 100]);
    expect(plan.shards[0]![0]).toEqual({ request: plan.due[0], attempt: 0, uid: list[0]!.metadata.uid });
  });

  it("builds cluster-scoped requests without a namespace", () => {
    const plan = planSweep({
      controller: "subpool",
      objects: [
        {
          apiVersion: "subrelay.example.com/v1alpha1",
          kind: "SubPool",
          metadata: { name: "demo", uid: "u1" },
        },
      ],
      now: new Date(0),
      resyncSeconds: 60,
      shardSize: 10,
    });
    expect(plan.due).toEqual([{ controller: "subpool", name: "demo" }]);
  });
});
