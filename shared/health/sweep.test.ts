import { describe, expect, it } from "vitest";
import { mapWithConcurrency } from "../concurrency/index.ts";
import { encodeHealthState } from "./annotation.ts";
import type { ProbeResult, Prober, ProbeTarget } from "./probe.ts";
import type { HealthState } from "./state.ts";
import { type HealthSubject, probeAll, probeDue } from "./sweep.ts";

const now = new Date("2026-01-01T00:10:00.000Z");
const thresholds = { successThreshold: 1, failureThreshold: 2, minReportIntervalSeconds: 60 };

function subject(name: string, over: Partial<HealthSubject> = {}): HealthSubject {
  return {
    key: { namespace: "ns", name },
    resourceVersion: "7",
    deleting: false,
    instance: `pod-${name}`,
    proxy: { host: `10.0.0.${name.length}`, port: 3128, scheme: "http" },
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
    expect(result.annotationPatches).toEqual([]);
  });

  it("steady state: probes, writes nothing, requests nothing", async () => {
    const proxies = ["a", "b", "c"].map((n) => subject(n, { annotation: encodeHealthState(healthy(n)) }));
    const result = await probeAll({
      proxies,
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: true, latencyMs: 12, status: 200 })),
      now: () => now,
      concurrency: 2,
    });
    expect(result.stats).toMatchObject({ probed: 3, ok: 3, failed: 0, writes: 0, reports: 0 });
    expect(result.annotationPatches).toEqual([]);
    expect(result.reconcileKeys).toEqual([]);
  });

  it("first verdict: writes the annotation and asks for a reconcile", async () => {
    const result = await probeAll({
      proxies: [subject("a")],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: true, latencyMs: 12, status: 200 })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.reconcileKeys).toEqual([{ namespace: "ns", name: "a" }]);
    expect(result.annotationPatches).toHaveLength(1);
    const body = result.annotationPatches[0]!.patch as {
      type: "merge";
      body: { metadata: Record<string, unknown>; status: { health: string } };
    };
    expect(body.body.metadata.resourceVersion).toBe("7");
    expect(JSON.parse(body.body.status.health)).toEqual({
      instance: "pod-a",
      verdict: true,
      consecOK: 1,
      consecFail: 0,
      reported: { healthy: true, latencyMs: 12, at: now.toISOString() },
    });
  });

  it("a failure below the threshold writes the counter but asks for no reconcile", async () => {
    const result = await probeAll({
      proxies: [subject("a", { annotation: encodeHealthState(healthy("a")) })],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: false, latencyMs: 1000, error: "timeout" })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.stats).toMatchObject({ failed: 1, writes: 1, reports: 0 });
    expect(result.reconcileKeys).toEqual([]);
  });

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
    const stored = (first.annotationPatches[0]!.patch as { body: { status: { health: string } } }).body.status
      .health;
    expect(JSON.parse(stored!).refused.reason).toBe("MetadataAddress");

    const second = await probeAll({
      proxies: [{ ...s, annotation: stored }],
      subjectFor: (x) => x,
      prober,
      now: () => now,
      concurrency: 1,
    });
    expect(second.annotationPatches).toEqual([]);
    expect(second.reconcileKeys).toEqual([]);

    const fixed = await probeAll({
      proxies: [{ ...s, annotation: stored, proxy: { host: "10.0.0.9", port: 80, scheme: "http" as const } }],
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
      proxies: [subject("a", { instance: "pod-new", annotation: encodeHealthState(healthy("a")) })],
      subjectFor: (s) => s,
      prober: fakeProber(() => ({ ok: false, latencyMs: 3 })),
      now: () => now,
      concurrency: 1,
    });
    expect(result.outcomes[0]?.state).toEqual({ instance: "pod-new", consecOK: 0, consecFail: 1 });
  });

  it("seeds a fresh state from the Healthy condition", async () => {
    const result = await probeAll({
      proxies: [subject("a", { seed: { healthy: true, latencyMs: 12, at: "2026-01-01T00:00:00.000Z" } })],
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
