import { afterEach, describe, expect, it, vi } from "vitest";
import type { ProbeResult, Prober } from "./probe.ts";
import { boundedProber, planProbeShards, probeDelays, probeShardPlanner } from "./shards.ts";
import type { HealthSubject } from "./sweep.ts";

const now = new Date("2026-11-30T12:00:00Z");
const subject = (name: string, intervalSeconds?: number, extra: Partial<HealthSubject> = {}): HealthSubject =>
  ({
    key: { namespace: "ns", name },
    deleting: false,
    instance: `i-${name}`,
    proxy: { host: "127.0.0.1", port: 3128, scheme: "http" },
    probe: {
      url: "http://example.com/",
      expectedStatus: 200,
      timeoutMs: 1000,
      ...(intervalSeconds ? { intervalSeconds } : {}),
    },
    thresholds: { successThreshold: 1, failureThreshold: 1 },
    ...extra,
  }) as HealthSubject;

describe("probeDelays", () => {
  it.each([
    [30, 2],
    [20, 3],
    [5, 12],
    [60, 1],
  ])(
    "interval %i s → %i probes per 60 s sweep, evenly apart, phase inside the interval",
    (interval, count) => {
      for (const name of ["a", "b", "c", "d"]) {
        const delays = probeDelays({ namespace: "ns", name }, interval, now, 60);
        expect(delays).toHaveLength(count);
        expect(delays[0]).toBeLessThan(interval);
        for (let i = 1; i < delays.length; i++) expect(delays[i]! - delays[i - 1]!).toBe(interval);
        expect(delays.at(-1)).toBeLessThan(60);
      }
    },
  );

  it("an interval above the period is probed on every k-th sweep only, the same sweeps each round", () => {
    const key = { namespace: "ns", name: "slow" };
    const sweeps = Array.from({ length: 6 }, (_, i) =>
      probeDelays(key, 180, new Date(now.getTime() + i * 60_000), 60),
    );
    expect(sweeps.filter((d) => d.length === 1)).toHaveLength(2);
    expect(sweeps.map((d) => d.length)).toEqual(
      [...sweeps.slice(3), ...sweeps.slice(0, 3)].map((d) => d.length),
    );
  });

  it.each([7, 45, 90, 30, 120])(
    "probe cadence exact for any interval: %i s apart across ten consecutive 60 s sweeps",
    (interval) => {
      for (const name of ["a", "b", "c"]) {
        const key = { namespace: "ns", name };
        const times = Array.from({ length: 10 }, (_, i) => {
          const at = new Date(now.getTime() + i * 60_000);
          return probeDelays(key, interval, at, 60).map((d) => at.getTime() / 1000 + d);
        }).flat();
        const gaps = times.slice(1).map((t, i) => t - times[i]!);
        expect(times.length).toBeGreaterThanOrEqual(Math.floor(600 / interval) - 1);
        expect(new Set(gaps)).toEqual(new Set([interval]));
      }
    },
  );

  it("a sweep that starts off the minute (the Node host's timer) keeps the rhythm too", () => {
    const key = { namespace: "ns", name: "offset" };
    const first = new Date(now.getTime() + 17_400);
    const times = Array.from({ length: 6 }, (_, i) => {
      const at = new Date(first.getTime() + i * 60_000);
      return probeDelays(key, 45, at, 60).map((d) => Math.floor(at.getTime() / 1000) + d);
    }).flat();
    expect(new Set(times.slice(1).map((t, i) => t - times[i]!))).toEqual(new Set([45]));
  });

  it("phases differ across Proxies (jitter), so probes spread over the minute", () => {
    const phases = new Set(
      Array.from({ length: 50 }, (_, i) => probeDelays({ namespace: "ns", name: `p${i}` }, 60, now, 60)[0]),
    );
    expect(phases.size).toBeGreaterThan(25);
  });
});

describe("planProbeShards", () => {
  it("cuts the due Proxies into shards of at most shardSize, one delay per shard, skipping the unprobeable", () => {
    const subjects = [
      ...Array.from({ length: 30 }, (_, i) => subject(`p${i}`, 30)),
      subject("deleting", 30, { deleting: true }),
      subject("no-address", 30, { proxy: undefined } as never),
    ];
    const shards = planProbeShards({
      proxies: subjects,
      subjectFor: (s) => s,
      now,
      sweepPeriodSeconds: 60,
      shardSize: 4,
    });
    const planned = shards.flatMap((s) => s.objects.map((o) => o.key.name));
    expect(planned).toHaveLength(60); // 30 Proxies, twice each
    expect(planned).not.toContain("deleting");
    expect(planned).not.toContain("no-address");
    expect(shards.every((s) => s.objects.length <= 4 && s.delaySeconds >= 0 && s.delaySeconds < 60)).toBe(
      true,
    );
    for (const name of ["p0", "p7"]) {
      const at = shards.filter((s) => s.objects.some((o) => o.key.name === name)).map((s) => s.delaySeconds);
      expect(at).toHaveLength(2);
      expect(at[1]! - at[0]!).toBe(30);
    }
  });
});

describe("boundedProber", () => {
  it("keeps at most `limit` probes in flight, and a hung probe ends at its own deadline", async () => {
    let active = 0;
    let peak = 0;
    const inner: Prober = {
      async probe(target) {
        active++;
        peak = Math.max(peak, active);
        try {
          if (target.url.includes("hang")) await new Promise(() => {});
          await new Promise((r) => setTimeout(r, 20));
          return { ok: true, latencyMs: 20 } satisfies ProbeResult;
        } finally {
          active--;
        }
      },
    };
    const bounded = boundedProber(inner, 6, 10);
    const target = (url: string) => ({
      proxy: { host: "127.0.0.1", port: 1, scheme: "http" as const },
      url,
      expectedStatus: 200,
      timeoutMs: 50,
    });
    const started = Date.now();
    const results = await Promise.all([
      bounded.probe(target("http://hang/")),
      ...Array.from({ length: 20 }, () => bounded.probe(target("http://ok/"))),
    ]);
    expect(bounded.peak()).toBe(6);
    expect(results[0]).toMatchObject({ ok: false, error: "probe deadline of 50 ms passed" });
    expect(results.slice(1).every((r) => r.ok)).toBe(true);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(bounded.inFlight()).toBe(0);
  });
});

describe("boundedProber's deadlines", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("share one timer: each probe ends at its own timeout, given to the prober, or at its backstop", async () => {
    vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
    // Honours the timer it is given, except for a URL that says it hangs for good.
    const inner: Prober = {
      probe: (target, timer) =>
        new Promise<ProbeResult>((resolve) => {
          if (!timer) throw new Error("no timer given");
          if (target.url.includes("stuck")) return;
          timer(target.timeoutMs, () =>
            resolve({ ok: false, latencyMs: target.timeoutMs, error: "timed out" }),
          );
        }),
    };
    const bounded = boundedProber(inner, 32, 250);
    const target = (url: string, timeoutMs: number) => ({
      proxy: { host: "127.0.0.1", port: 1, scheme: "http" as const },
      url,
      expectedStatus: 200,
      timeoutMs,
    });
    const results = Promise.all([
      ...Array.from({ length: 20 }, (_, i) => bounded.probe(target("http://hang/", 1000 + i))),
      bounded.probe(target("http://stuck/", 500)),
    ]);
    await vi.advanceTimersByTimeAsync(0);
    expect(bounded.inFlight()).toBe(21);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(749);
    expect(bounded.inFlight()).toBe(21);
    await vi.advanceTimersByTimeAsync(1);
    expect(bounded.inFlight()).toBe(20);
    await vi.advanceTimersByTimeAsync(300);
    const all = await results;
    expect(all.slice(0, 20).every((r) => r.error === "timed out")).toBe(true);
    expect(all[20]).toMatchObject({ ok: false, error: "probe deadline of 500 ms passed", latencyMs: 750 });
    expect(bounded.inFlight()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("probeShardPlanner", () => {
  const subjects = Array.from({ length: 1000 }, (_, i) => subject(`p${i}`, 30));
  const opts = { subjectFor: (s: HealthSubject) => s, now, sweepPeriodSeconds: 60, shardSize: 8 };

  it("page by page, it plans the same probes as the whole list, every shard but one per delay full", () => {
    const planner = probeShardPlanner(opts);
    const paged = [];
    let carried = 0;
    for (let i = 0; i < subjects.length; i += 100) {
      paged.push(...planner.add(subjects.slice(i, i + 100)));
      // What waits between pages: under one shard per delay.
      carried = Math.max(carried, 2 * 100 * (i / 100 + 1) - paged.reduce((n, s) => n + s.objects.length, 0));
    }
    const rest = planner.flush();
    const probes = (shards: { delaySeconds: number; objects: HealthSubject[] }[]) =>
      shards.flatMap((s) => s.objects.map((o) => `${s.delaySeconds}:${o.key.name}`)).sort();
    const whole = planProbeShards({ ...opts, proxies: subjects });
    expect(probes([...paged, ...rest])).toEqual(probes(whole));
    expect(paged.every((s) => s.objects.length === 8)).toBe(true);
    expect(new Set(rest.map((s) => s.delaySeconds)).size).toBe(rest.length);
    expect(carried).toBeLessThanOrEqual(60 * 7);
    expect(planner.flush()).toEqual([]);
  });
});
