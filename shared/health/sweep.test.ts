import { describe, expect, it, vi } from "vitest";
import { keyedSemaphore, mapWithConcurrency } from "../concurrency/index.ts";
import type { Patch } from "../kube/index.ts";
import type { ProbeResult, Prober, ProbeTarget } from "./probe.ts";
import type { HealthState } from "./state.ts";
import { encodeHealthState } from "./stored-state.ts";
import { type HealthSubject, type ProbeResume, probeAll, probeDue } from "./sweep.ts";
import { parseProbeAllowList } from "./target.ts";

const now = new Date("2026-01-01T00:10:00.000Z");
const thresholds = { successThreshold: 1, failureThreshold: 2, minReportIntervalSeconds: 60 };

function subject(name: string, over: Partial<HealthSubject> = {}): HealthSubject {
  return {
    key: { namespace: "ns", name },
    resourceVersion: "7",
    deleting: false,
    instance: `pod-${name}`,
    proxy: { host: `10.0.0.${name.length}`, port: 3128, scheme: "http" },
    // A Managed instance's address (kubefn's provider gave it).
    proxyTrusted: true,
    probe: { url: "http://example.com/", expectedStatus: 200, timeoutMs: 1000 },
    thresholds,
    ...over,
  };
}

function fakeProber(
  answer: (t: ProbeTarget) => ProbeResult | Promise<ProbeResult>,
): Prober & { calls: ProbeTarget[] } {
  const calls: ProbeTarget[] = [];
  return {
    calls,
    async probe(t) {
      calls.push(t);
      return answer(t);
    },
  };
}

const healthy = (name: string, latencyMs = 10): HealthState => ({
  instance: `pod-${name}`,
  verdict: true,
  consecOK: 1,
  consecFail: 0,
  reported: { healthy: true, latencyMs, at: "2026-01-01T00:00:00.000Z" },
});

describe("probeAll", () => {
  it("spreadMs starts the probes in small groups over the spread, not as one burst", async () => {
    // A burst measures the host (thirty probes queue behind each other for tens of ms, past the
    // 20 ms band); spread over the second, a group of a few is measured together, well inside it.
    // Timers never fire early, so the lower bounds hold on any host.
    const t0 = performance.now();
    const startedAt = new Map<string, number>();
    const prober = fakeProber((t) => {
      startedAt.set(t.proxy.host, performance.now() - t0);
      return { ok: true, latencyMs: 5 };
    });
    const names = ["a", "bb", "ccc", "dddd"];
    const result = await probeAll({
      proxies: names.map((n) => subject(n, { stored: encodeHealthState(healthy(n, 5)) })),
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 2,
      spreadMs: 400,
    });
    expect(result.stats).toMatchObject({ probed: 4, writes: 0 });
    // Groups as wide as the slots (2 here, at most spreadGroupSize): a, bb at 0; ccc, dddd at 200.
    const starts = names.map((n) => startedAt.get(`10.0.0.${n.length}`)!);
    for (const [i, ms] of starts.entries()) expect(ms).toBeGreaterThanOrEqual(Math.floor(i / 2) * 200 - 1);
    expect(starts[1]! - starts[0]!).toBeLessThan(100);
    expect(starts[3]! - starts[2]!).toBeLessThan(100);
  });

  it("spreadMs arms one timer a group, not one a probe", async () => {
    vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      const prober = fakeProber(() => ({ ok: true, latencyMs: 5 }));
      const names = Array.from({ length: 24 }, (_, i) => `p${i}`);
      const swept = probeAll({
        proxies: names.map((n) => subject(n, { stored: encodeHealthState(healthy(n, 5)) })),
        subjectFor: (s) => s,
        prober,
        now: () => now,
        concurrency: 8,
        spreadMs: 900,
      });
      await vi.advanceTimersByTimeAsync(0);
      // Three groups of 8: the first probed at once, the other two each waiting on one timer.
      expect(prober.calls).toHaveLength(8);
      expect(vi.getTimerCount()).toBe(2);
      await vi.advanceTimersByTimeAsync(300);
      expect(prober.calls).toHaveLength(16);
      await vi.advanceTimersByTimeAsync(300);
      expect((await swept).stats.probed).toBe(24);
    } finally {
      vi.useRealTimers();
    }
  });

  it("skips proxies without an address or instance and those being deleted", async () => {
    const prober = fakeProber(() => ({ ok: true, latencyMs: 5 }));
    const result = await probeAll({
      proxies: [
        subject("a", { proxy: undefined }),
        subject("b", { instance: undefined }),
        subject("c", { deleting: true }),
      ],
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 4,
    });
    expect(prober.calls).toEqual([]);
    expect(result.stats).toMatchObject({ skipped: 3, probed: 0 });
    expect(result.statusPatches).toEqual([]);
  });

  it("steady state: probes, writes nothing, requests nothing", async () => {
    const proxies = ["a", "b", "c"].map((n) => subject(n, { stored: encodeHealthState(healthy(n)) }));
    const result = await probeAll({
      proxies,
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: true, latencyMs: 12, status: 200 })),
      now: () => now,
      concurrency: 2,
    });
    expect(result.stats).toMatchObject({ probed: 3, ok: 3, failed: 0, writes: 0, reports: 0 });
    expect(result.statusPatches).toEqual([]);
    expect(result.reconcileKeys).toEqual([]);
  });

  it("first verdict: writes status.health and asks for a reconcile", async () => {
    const result = await probeAll({
      proxies: [subject("a")],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: true, latencyMs: 12, status: 200 })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.reconcileKeys).toEqual([{ namespace: "ns", name: "a" }]);
    expect(result.statusPatches).toHaveLength(1);
    const body = result.statusPatches[0]!.patch as {
      type: "merge";
      body: { metadata: Record<string, unknown>; status: { health: string } };
    };
    expect(body.body.metadata.resourceVersion).toBe("7");
    expect(JSON.parse(body.body.status.health)).toEqual({
      instance: "pod-a",
      verdict: true,
      consecOK: 1,
      consecFail: 0,
      reported: { healthy: true, latencyMs: 12, at: now.toISOString(), samples: 1 },
    });
  });

  it("a failure below the threshold writes the counter but asks for no reconcile", async () => {
    // The probe and its recheck fail: two failures of the three the verdict needs.
    const thresholds = { successThreshold: 1, failureThreshold: 3, minReportIntervalSeconds: 60 };
    const result = await probeAll({
      proxies: [subject("a", { stored: encodeHealthState(healthy("a")), thresholds })],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: false, latencyMs: 1000, error: "timeout" })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.stats).toMatchObject({ failed: 1, writes: 1, reports: 0 });
    expect(result.reconcileKeys).toEqual([]);
  });

  it.each([
    [
      "an External proxy on a private address",
      { proxy: { host: "10.0.0.9", port: 3128, scheme: "http" as const }, proxyTrusted: false },
      "PrivateAddress",
    ],
    [
      "an External proxy on loopback",
      { proxy: { host: "127.0.0.1", port: 3128, scheme: "http" as const }, proxyTrusted: false },
      "Loopback",
    ],
    [
      "a probe URL on the internal network",
      { probe: { url: "http://10.96.0.10:53/", expectedStatus: 200, timeoutMs: 1000 } },
      "PrivateAddress",
    ],
    [
      "a probe URL at Azure's WireServer",
      { probe: { url: "http://168.63.129.16/machine", expectedStatus: 200, timeoutMs: 1000 } },
      "MetadataAddress",
    ],
  ])(
    "%s is refused unless the operator's allow-list admits it: the tenant learns nothing of the internal network",
    async (_n, over, reason) => {
      const prober = fakeProber(() => ({ ok: true, latencyMs: 3 }));
      const s = subject("a", over as Partial<HealthSubject>);
      const refused = await probeAll({
        proxies: [s],
        subjectFor: (x) => x,
        prober,
        now: () => now,
        concurrency: 1,
      });
      expect(prober.calls).toEqual([]);
      expect(refused.outcomes[0]).toMatchObject({ kind: "refused", state: { refused: { reason } } });
      if (reason === "MetadataAddress") return;
      const allow = parseProbeAllowList(["10.0.0.0/8", "127.0.0.0/8"]);
      if (!allow.ok) throw new Error("bad allow-list");
      const admitted = await probeAll({
        proxies: [s],
        subjectFor: (x) => x,
        prober,
        allowList: allow.allowList,
        now: () => now,
        concurrency: 1,
      });
      expect(admitted.outcomes[0]?.kind).toBe("probed");
      // The prober screens what it resolves with the same policy.
      expect(prober.calls[0]?.policy?.allow).toBe(allow.allowList);
    },
  );

  it("a refused target is never probed, is recorded once and asks for a reconcile once", async () => {
    const prober = fakeProber(() => ({ ok: true, latencyMs: 1 }));
    const s = subject("a", { proxy: { host: "169.254.169.254", port: 80, scheme: "http" } });
    const first = await probeAll({
      proxies: [s],
      subjectFor: (x) => x,
      prober,
      now: () => now,
      concurrency: 1,
    });
    expect(prober.calls).toEqual([]);
    expect(first.stats.refused).toBe(1);
    expect(first.reconcileKeys).toEqual([s.key]);
    const stored = (first.statusPatches[0]!.patch as { body: { status: { health: string } } }).body.status
      .health;
    expect(JSON.parse(stored!).refused.reason).toBe("MetadataAddress");

    const second = await probeAll({
      proxies: [{ ...s, stored }],
      subjectFor: (x) => x,
      prober,
      now: () => now,
      concurrency: 1,
    });
    expect(second.statusPatches).toEqual([]);
    expect(second.reconcileKeys).toEqual([]);

    const fixed = await probeAll({
      proxies: [{ ...s, stored, proxy: { host: "10.0.0.9", port: 80, scheme: "http" as const } }],
      subjectFor: (x) => x,
      prober,
      now: () => now,
      concurrency: 1,
    });
    expect(fixed.reconcileKeys).toEqual([s.key]);
  });

  it("a refusal reported by the prober (resolved address) is recorded like a static one", async () => {
    const result = await probeAll({
      proxies: [subject("a")],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({
        ok: false,
        latencyMs: 1,
        refused: { reason: "MetadataAddress", message: "resolved to 169.254.169.254" },
      })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.stats).toMatchObject({ refused: 1, probed: 0 });
    expect(result.reconcileKeys).toHaveLength(1);
  });

  it("a prober that throws counts as a failed probe", async () => {
    const result = await probeAll({
      proxies: [subject("a")],
      subjectFor: (s) => s,
      prober: fakeProber(() => {
        throw new Error("boom");
      }),
      now: () => now,
      concurrency: 1,
    });
    expect(result.stats).toMatchObject({ probed: 1, failed: 1 });
    expect(result.outcomes[0]?.result?.error).toContain("boom");
  });

  it("a new instance starts fresh even with a stored verdict", async () => {
    const result = await probeAll({
      proxies: [subject("a", { instance: "pod-new", stored: encodeHealthState(healthy("a")) })],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: false, latencyMs: 3 })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.outcomes[0]?.state).toEqual({ instance: "pod-new", consecOK: 0, consecFail: 1 });
  });

  it("seeds a fresh state from the Healthy condition", async () => {
    const result = await probeAll({
      proxies: [
        subject("a", {
          seed: { healthy: true, latencyMs: 12, at: "2026-01-01T00:00:00.000Z" },
          thresholds: { successThreshold: 1, failureThreshold: 3, minReportIntervalSeconds: 60 },
        }),
      ],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: false, latencyMs: 3 })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.outcomes[0]?.state?.verdict).toBe(true);
    expect(result.reconcileKeys).toEqual([]);
  });

  it("respects the concurrency bound", async () => {
    let inFlight = 0;
    let peak = 0;
    const prober = fakeProber(async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 2));
      inFlight--;
      return { ok: true, latencyMs: 2 };
    });
    const proxies = Array.from({ length: 40 }, (_, i) => subject(`p${i}`));
    const result = await probeAll({ proxies, subjectFor: (s) => s, prober, now: () => now, concurrency: 5 });
    expect(result.stats.probed).toBe(40);
    expect(peak).toBe(5);
  });

  it("probes a long-interval proxy on every k-th sweep only", async () => {
    const prober = fakeProber(() => ({ ok: true, latencyMs: 1 }));
    const s = subject("a", {
      probe: { url: "http://example.com/", expectedStatus: 200, timeoutMs: 1000, intervalSeconds: 300 },
    });
    let probed = 0;
    for (let minute = 0; minute < 30; minute++) {
      const at = new Date(now.getTime() + minute * 60_000);
      const r = await probeAll({
        proxies: [s],
        subjectFor: (x) => x,
        prober,
        now: () => at,
        concurrency: 1,
        sweepPeriodSeconds: 60,
      });
      probed += r.stats.probed;
    }
    expect(probed).toBe(6);
  });
});

describe("one tenant's hanging targets do not take every probe slot", () => {
  /** Every probe of namespace `greedy` hangs until released; the others answer at once. */
  function hangingProber() {
    const hanging: (() => void)[] = [];
    const started: string[] = [];
    const prober: Prober = {
      probe: (t) => {
        started.push(t.proxy.host);
        if (!t.proxy.host.startsWith("greedy")) return Promise.resolve({ ok: true, latencyMs: 5 });
        return new Promise((resolve) =>
          hanging.push(() => resolve({ ok: false, latencyMs: 1000, error: "timeout" })),
        );
      },
    };
    return {
      prober,
      started,
      releaseAll: () => {
        for (const release of hanging.splice(0)) release();
      },
    };
  }
  const greedy = Array.from({ length: 12 }, (_, i) =>
    subject(`g${i}`, {
      key: { namespace: "greedy", name: `g${i}` },
      proxy: { host: `greedy-${i}`, port: 3128, scheme: "http" },
    }),
  );
  const other = subject("healthy", {
    key: { namespace: "other", name: "healthy" },
    proxy: { host: "other-healthy", port: 3128, scheme: "http" },
    stored: encodeHealthState(healthy("healthy", 5)),
  });
  const settle = async () => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
  };

  it("with a per-namespace budget, the other namespace's Proxy is probed while the hanging ones hold theirs", async () => {
    const { prober, started, releaseAll } = hangingProber();
    const sweep = probeAll({
      proxies: [...greedy, other],
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 4,
      namespaceSlots: keyedSemaphore(2),
    });
    await settle();
    // Two of the hanging namespace's probes run; the other namespace's Proxy is not held behind them.
    expect(started.filter((h) => h.startsWith("greedy"))).toHaveLength(2);
    expect(started).toContain("other-healthy");
    // The hanging namespace waits for itself: its probes are made as its own slots free.
    for (let freed = 0; freed < 6; freed++) {
      releaseAll();
      await settle();
    }
    const result = await sweep;
    expect(result.stats).toMatchObject({ probed: 13, ok: 1, failed: 12 });
  });

  it("without one (the attack): the hanging namespace takes every slot and the other Proxy waits for them", async () => {
    const { prober, started, releaseAll } = hangingProber();
    const sweep = probeAll({
      proxies: [...greedy, other],
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 4,
    });
    await settle();
    expect(started).toHaveLength(4);
    expect(started).not.toContain("other-healthy");
    for (let freed = 0; freed < 6; freed++) {
      releaseAll();
      await settle();
    }
    await sweep;
  });
});

describe("probeDue", () => {
  it.each([
    [30, 60, true],
    [60, 60, true],
    [80, 60, true],
  ])("interval %ss with sweeps every %ss is due every sweep", (interval, period, due) => {
    expect(probeDue({ name: "x" }, now, interval, period)).toBe(due);
  });

  it("spreads phases across keys", () => {
    const dueNow = Array.from({ length: 1000 }, (_, i) =>
      probeDue({ namespace: "ns", name: `p${i}` }, now, 600, 60),
    );
    const count = dueNow.filter(Boolean).length;
    expect(count).toBeGreaterThan(50);
    expect(count).toBeLessThan(150);
  });
});

describe("mapWithConcurrency", () => {
  it("keeps order and handles an empty list", async () => {
    expect(await mapWithConcurrency([], 3, async (x: number) => x)).toEqual([]);
    expect(await mapWithConcurrency([3, 1, 2], 2, async (x) => x * 2)).toEqual([6, 2, 4]);
  });
});

const bodyOf = (patch: Patch | undefined) => (patch?.type === "merge" ? patch.body : undefined);

describe("latency reports under jitter (the steady cost of 900 health-checked Proxies)", () => {
  // A loopback proxy answers in ~5 ms; on a loaded host one probe in several stalls by tens of
  // milliseconds (measured on the bench machine: p50 6 ms, p90 17 ms, p99 91 ms).
  const jittery = [5, 6, 48, 5, 7, 90, 6, 5, 33, 5, 6, 4, 61, 5, 7, 5, 29, 6, 5, 120, 5, 6, 5, 7, 44, 5];

  /** Probes one Proxy every 30 s through the sweep, feeding the stored state back in. */
  async function run(latencies: number[], latencySamples?: number) {
    let stored = encodeHealthState(healthy("a", 5));
    let next = 0;
    let clock = now.getTime();
    const reports: number[] = [];
    let patches = 0;
    let passes = 0;
    let probes = 0;
    const prober = fakeProber(() => {
      probes++;
      return { ok: true, latencyMs: latencies[Math.min(next++, latencies.length - 1)]!, status: 200 };
    });
    while (next < latencies.length) {
      clock += 30_000;
      const result = await probeAll({
        proxies: [
          subject("a", {
            stored,
            thresholds: { ...thresholds, ...(latencySamples ? { latencySamples } : {}) },
            latencyStatus: (r) => ({ latencyMillis: r.latencyMs }),
          }),
        ],
        subjectFor: (s) => s,
        prober,
        now: () => new Date(clock),
        concurrency: 1,
        confirmDelayMs: 0,
      });
      for (const o of result.outcomes) if (o.report) reports.push(o.report.latencyMs);
      patches += result.statusPatches.length;
      passes += result.reconcileKeys.length;
      const patched = bodyOf(result.statusPatches[0]?.patch) as { status: { health: string } } | undefined;
      if (patched) stored = patched.status.health;
    }
    return { reports, patches, passes, probes };
  }

  it("a jittery series at loopback scale reports nothing and writes nothing", async () => {
    const { reports, patches, passes } = await run(jittery);
    expect(reports).toEqual([]);
    expect(patches).toBe(0);
    expect(passes).toBe(0);
  });

  it("the seed's one-probe rule reports the same series (what the bench measured)", async () => {
    const { reports, patches } = await run(jittery, 1);
    expect(reports.length).toBeGreaterThan(3);
    expect(patches).toBe(reports.length);
  });

  it("a real shift is reported once, with the median of the probes that saw it, in one patch", async () => {
    const shifted = [5, 6, 5, 210, 190, 230, 205, 198, 220, 201, 199, 215];
    const { reports, patches, passes } = await run(shifted);
    expect(reports).toEqual([210]);
    expect(patches).toBe(1);
    expect(passes).toBe(0);
  });

  it("the latency patch carries the projected status fields beside the health state", async () => {
    const prober = fakeProber(() => ({ ok: true, latencyMs: 300, status: 200 }));
    const result = await probeAll({
      proxies: [
        subject("a", {
          stored: encodeHealthState(healthy("a", 10)),
          latencyStatus: (r) => ({ latencyMillis: r.latencyMs, lastHealthCheckTime: r.at }),
        }),
      ],
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 1,
      confirmDelayMs: 0,
    });
    expect(prober.calls).toHaveLength(3);
    expect(result.stats).toMatchObject({ probed: 1, confirmations: 2, reports: 1, writes: 1 });
    expect(result.reconcileKeys).toEqual([]);
    expect(bodyOf(result.statusPatches[0]!.patch)).toMatchObject({
      metadata: { resourceVersion: "7" },
      status: { latencyMillis: 300, lastHealthCheckTime: now.toISOString() },
    });
  });

  it("without latencyStatus a latency report still asks for a pass", async () => {
    const result = await probeAll({
      proxies: [subject("a", { stored: encodeHealthState(healthy("a", 10)) })],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: true, latencyMs: 300, status: 200 })),
      now: () => now,
      concurrency: 1,
      confirmDelayMs: 0,
    });
    expect(result.stats.reports).toBe(1);
    expect(result.reconcileKeys).toEqual([{ namespace: "ns", name: "a" }]);
  });

  it("a Proxy pausing before its confirmations leaves its probe slot to the others", async () => {
    const url = (name: string) => ({
      probe: { url: `http://${name}.example.com/`, expectedStatus: 200, timeoutMs: 1000 },
    });
    const prober = fakeProber((t) => ({
      ok: true,
      latencyMs: t.url.includes("slow") ? 300 : 10,
      status: 200,
    }));
    const result = await probeAll({
      proxies: [
        subject("slow", { stored: encodeHealthState(healthy("slow", 10)), ...url("slow") }),
        subject("fast", { stored: encodeHealthState(healthy("fast", 10)), ...url("fast") }),
      ],
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 1,
      confirmDelayMs: 20,
    });
    // One slot: the fast Proxy is probed while the slow one waits to confirm, not after it.
    expect(prober.calls.map((c) => new URL(c.url).hostname.split(".")[0])).toEqual([
      "slow",
      "fast",
      "slow",
      "slow",
    ]);
    expect(result.stats).toMatchObject({ probed: 2, confirmations: 2, reports: 1 });
  });

  it("a failed confirmation ends the confirmations without a report", async () => {
    let n = 0;
    const result = await probeAll({
      proxies: [subject("a", { stored: encodeHealthState(healthy("a", 10)) })],
      subjectFor: (s) => s,
      prober: fakeProber(() =>
        n++ === 0 ? { ok: true, latencyMs: 300, status: 200 } : { ok: false, latencyMs: 1000 },
      ),
      now: () => now,
      concurrency: 1,
      confirmDelayMs: 0,
    });
    expect(n).toBe(2);
    expect(result.stats).toMatchObject({ reports: 0, writes: 0, confirmations: 0 });
  });
});

describe("a result against the verdict is checked once more", () => {
  const thresholds3 = { successThreshold: 1, failureThreshold: 3, minReportIntervalSeconds: 60 };

  /** One sweep per 30 s over one Proxy; `answers` are the prober's results in order. */
  async function run(answers: boolean[], sweeps: number, thresholds = thresholds3) {
    let stored = encodeHealthState({ ...healthy("a", 5), consecOK: 1 });
    let clock = now.getTime();
    let calls = 0;
    const prober = fakeProber(() => ({ ok: answers[Math.min(calls++, answers.length - 1)]!, latencyMs: 5 }));
    const writes: number[] = [];
    const flips: number[] = [];
    for (let i = 0; i < sweeps; i++) {
      clock += 30_000;
      const result = await probeAll({
        proxies: [subject("a", { stored, thresholds })],
        subjectFor: (s) => s,
        prober,
        now: () => new Date(clock),
        concurrency: 1,
        confirmDelayMs: 0,
      });
      if (result.statusPatches.length > 0) writes.push(i);
      if (result.outcomes[0]?.report?.reason === "ThresholdFlip") flips.push(i);
      const patched = bodyOf(result.statusPatches[0]?.patch) as { status: { health: string } } | undefined;
      if (patched) stored = patched.status.health;
    }
    return { writes, flips, calls };
  }

  it("a lone failed probe of a healthy proxy (a stall) writes nothing when the recheck succeeds", async () => {
    const { writes, flips, calls } = await run([true, false, true, true, false, true, true], 5);
    expect(writes).toEqual([]);
    expect(flips).toEqual([]);
    expect(calls).toBe(7);
  });

  it("a proxy that is down flips at its third failed probe, the recheck counted (failureThreshold 3)", async () => {
    const { writes, flips } = await run([false], 4);
    // Sweep 0: the probe and its recheck fail (2); sweep 1: the third failure flips.
    expect(flips).toEqual([1]);
    expect(writes).toEqual([0, 1]);
  });

  it("the verdict recheck never hides a flaky proxy: failing two requests of three reaches failureThreshold", async () => {
    // Requests answer F F S, repeated, and failureThreshold is 2. Without counting the recheck,
    // each sweep counted one failure and the next success reset it: the proxy stayed Ready and
    // kept receiving crawl traffic.
    const { flips } = await run([false, false, true], 6, { ...thresholds3, failureThreshold: 2 });
    // Unhealthy at the first sweep (its probe and recheck failed); healthy again once it answers.
    expect(flips[0]).toBe(0);
  });

  it("deferred, a shard pauses nowhere: the Proxy comes back to be confirmed and reports as inline", async () => {
    const prober = fakeProber(() => ({ ok: true, latencyMs: 300, status: 200 }));
    const a = subject("a", {
      stored: encodeHealthState(healthy("a", 10)),
      latencyStatus: (r) => ({ latencyMillis: r.latencyMs, lastHealthCheckTime: r.at }),
    });
    let clock = now.getTime();
    const step = (resume?: ProbeResume[]) =>
      probeAll({
        proxies: [a],
        subjectFor: (s) => s,
        prober,
        now: () => new Date(clock),
        concurrency: 1,
        deferConfirmations: true,
        confirmDelayMs: 60_000, // never waited: a pause here would time the test out
        resume,
      });
    const first = await step();
    expect(prober.calls).toHaveLength(1);
    expect(first.statusPatches).toEqual([]);
    expect(first.stats).toMatchObject({ probed: 1, confirmations: 0, reports: 0 });
    const later1 = first.outcomes[0]!.later!;
    expect(later1).toMatchObject({ confirmations: [] });
    clock += 1000;
    const second = await step([later1]);
    expect(prober.calls).toHaveLength(2);
    expect(second.statusPatches).toEqual([]);
    expect(second.stats).toMatchObject({ probed: 0, confirmations: 1 });
    const later2 = second.outcomes[0]!.later!;
    expect(later2.confirmations).toEqual([300]);
    clock += 1000;
    const third = await step([later2]);
    expect(prober.calls).toHaveLength(3);
    expect(third.outcomes[0]!.later).toBeUndefined();
    expect(third.stats).toMatchObject({ probed: 0, confirmations: 1, reports: 1, writes: 1 });
    expect(bodyOf(third.statusPatches[0]!.patch)).toMatchObject({
      status: { latencyMillis: 300, lastHealthCheckTime: new Date(clock).toISOString() },
    });
  });

  it("resumed, the confirmation probes are spread over spreadMs like first probes, not one burst", async () => {
    const t0 = performance.now();
    const startedAt = new Map<string, number>();
    const prober = fakeProber((t) => {
      startedAt.set(t.proxy.host, performance.now() - t0);
      return { ok: true, latencyMs: 300, status: 200 };
    });
    const names = ["a", "bb", "ccc", "dddd"];
    const result = await probeAll({
      proxies: names.map((n) => subject(n, { stored: encodeHealthState(healthy(n, 10)) })),
      subjectFor: (s) => s,
      prober,
      now: () => now,
      concurrency: 2,
      deferConfirmations: true,
      spreadMs: 400,
      resume: names.map(() => ({ result: { ok: true, latencyMs: 300 }, confirmations: [] })),
    });
    // Each made its first confirmation here (the resumed probe is not probed again) and is
    // deferred again for the second.
    expect(prober.calls).toHaveLength(4);
    expect(result.stats).toMatchObject({ probed: 0, confirmations: 4, writes: 0 });
    expect(result.outcomes.map((o) => o.later?.confirmations)).toEqual(names.map(() => [300]));
    // In groups as wide as the 2 slots: the second group starts 200 ms in.
    const starts = names.map((n) => startedAt.get(`10.0.0.${n.length}`)!);
    for (const [i, ms] of starts.entries()) expect(ms).toBeGreaterThanOrEqual(Math.floor(i / 2) * 200 - 1);
  });

  it("deferred, a result against the verdict is rechecked by a later invocation and a blip writes nothing", async () => {
    let n = 0;
    const prober = fakeProber(() =>
      n++ === 0 ? { ok: false, latencyMs: 1000 } : { ok: true, latencyMs: 10, status: 200 },
    );
    const a = subject("a", { stored: encodeHealthState(healthy("a", 10)) });
    const step = (resume?: ProbeResume[]) =>
      probeAll({
        proxies: [a],
        subjectFor: (s) => s,
        prober,
        now: () => now,
        concurrency: 1,
        deferConfirmations: true,
        resume,
      });
    const first = await step();
    const later = first.outcomes[0]!.later!;
    expect(later).toMatchObject({ result: { ok: false }, confirmations: [] });
    expect(first.statusPatches).toEqual([]);
    const second = await step([later]);
    expect(n).toBe(2);
    expect(second.outcomes[0]!.later).toBeUndefined();
    expect(second.stats).toMatchObject({ probed: 0, confirmations: 1, reports: 0, writes: 0 });
  });
});
