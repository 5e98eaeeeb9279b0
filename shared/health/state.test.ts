import { describe, expect, it } from "vitest";
import {
  type HealthSeed,
  type HealthState,
  type HealthThresholds,
  latencyChanged,
  projectHealth,
  recordProbe,
  recordRefusal,
  stateFor,
} from "./state.ts";

const cfg: HealthThresholds = { successThreshold: 2, failureThreshold: 3, minReportIntervalSeconds: 60 };
const seed: HealthSeed = { instance: "pod-a" };
const t0 = new Date("2026-01-01T00:00:00.000Z");
const at = (seconds: number) => new Date(t0.getTime() + seconds * 1000);
const ok = (latencyMs: number, seconds: number) => ({ ok: true, latencyMs, at: at(seconds) });
const fail = (seconds: number) => ({ ok: false, latencyMs: 5000, at: at(seconds) });

const healthyReported = (reportedAtSeconds: number, latencyMs = 100): HealthState => ({
  instance: "pod-a",
  verdict: true,
  consecOK: 2,
  consecFail: 0,
  reported: { healthy: true, latencyMs, at: at(reportedAtSeconds).toISOString() },
});
const unhealthyReported = (reportedAtSeconds: number): HealthState => ({
  instance: "pod-a",
  verdict: false,
  consecOK: 0,
  consecFail: 3,
  reported: { healthy: false, latencyMs: 5000, at: at(reportedAtSeconds).toISOString() },
});

describe("recordProbe transitions", () => {
  it.each([
    {
      name: "fresh + ok below successThreshold: counts, no verdict, no report",
      prev: undefined,
      probe: ok(10, 0),
      state: { instance: "pod-a", consecOK: 1, consecFail: 0 },
      report: undefined,
    },
    {
      name: "fresh + fail below failureThreshold: counts, no verdict",
      prev: undefined,
      probe: fail(0),
      state: { instance: "pod-a", consecOK: 0, consecFail: 1 },
      report: undefined,
    },
    {
      name: "ok reaching successThreshold: first verdict healthy",
      prev: { instance: "pod-a", consecOK: 1, consecFail: 0 },
      probe: ok(10, 60),
      state: {
        instance: "pod-a",
        verdict: true,
        consecOK: 2,
        consecFail: 0,
        reported: { healthy: true, latencyMs: 10, at: at(60).toISOString(), samples: 1 },
      },
      report: { healthy: true, latencyMs: 10, at: at(60).toISOString(), reason: "FirstVerdict", samples: 1 },
    },
    {
      name: "fail reaching failureThreshold: first verdict unhealthy",
      prev: { instance: "pod-a", consecOK: 0, consecFail: 2 },
      probe: fail(120),
      state: {
        instance: "pod-a",
        verdict: false,
        consecOK: 0,
        consecFail: 3,
        reported: { healthy: false, latencyMs: 5000, at: at(120).toISOString(), samples: 1 },
      },
      report: {
        healthy: false,
        latencyMs: 5000,
        at: at(120).toISOString(),
        reason: "FirstVerdict",
        samples: 1,
      },
    },
    {
      name: "a failure resets the success count before any verdict",
      prev: { instance: "pod-a", consecOK: 1, consecFail: 0 },
      probe: fail(60),
      state: { instance: "pod-a", consecOK: 0, consecFail: 1 },
      report: undefined,
    },
    {
      name: "healthy + one failure: stays healthy, counts",
      prev: healthyReported(0),
      probe: fail(120),
      state: { ...healthyReported(0), consecOK: 0, consecFail: 1 },
      report: undefined,
    },
    {
      name: "healthy + failure reaching failureThreshold: flips",
      prev: { ...healthyReported(0), consecOK: 0, consecFail: 2 },
      probe: fail(120),
      state: {
        instance: "pod-a",
        verdict: false,
        consecOK: 0,
        consecFail: 3,
        reported: { healthy: false, latencyMs: 5000, at: at(120).toISOString(), samples: 1 },
      },
      report: {
        healthy: false,
        latencyMs: 5000,
        at: at(120).toISOString(),
        reason: "ThresholdFlip",
        samples: 1,
      },
    },
    {
      name: "unhealthy + ok below successThreshold: stays unhealthy",
      prev: unhealthyReported(0),
      probe: ok(10, 120),
      state: { ...unhealthyReported(0), consecOK: 1, consecFail: 0 },
      report: undefined,
    },
    {
      name: "unhealthy + ok reaching successThreshold: flips",
      prev: { ...unhealthyReported(0), consecOK: 1, consecFail: 0 },
      probe: ok(30, 120),
      state: {
        instance: "pod-a",
        verdict: true,
        consecOK: 2,
        consecFail: 0,
        reported: { healthy: true, latencyMs: 30, at: at(120).toISOString(), samples: 1 },
      },
      report: {
        healthy: true,
        latencyMs: 30,
        at: at(120).toISOString(),
        reason: "ThresholdFlip",
        samples: 1,
      },
    },
    {
      name: "threshold flips are not rate-limited: a flip 30 s after the last report is reported at once",
      prev: { ...healthyReported(0), consecOK: 0, consecFail: 2 },
      probe: fail(30),
      state: {
        instance: "pod-a",
        verdict: false,
        consecOK: 0,
        consecFail: 3,
        reported: { healthy: false, latencyMs: 5000, at: at(30).toISOString(), samples: 1 },
      },
      report: {
        healthy: false,
        latencyMs: 5000,
        at: at(30).toISOString(),
        reason: "ThresholdFlip",
        samples: 1,
      },
    },
    {
      name: "latency change > max(20ms, 50%) in one probe: not reported yet, confirmations asked",
      prev: healthyReported(0, 100),
      probe: ok(151, 60),
      state: healthyReported(0, 100),
      report: undefined,
      confirm: true,
    },
    {
      name: "latency change in three probes: the median is reported",
      prev: healthyReported(0, 100),
      probe: { ...ok(190, 60), confirmations: [151, 170] },
      state: {
        ...healthyReported(0),
        reported: { healthy: true, latencyMs: 170, at: at(60).toISOString(), samples: 3 },
      },
      report: {
        healthy: true,
        latencyMs: 170,
        at: at(60).toISOString(),
        reason: "LatencyChange",
        samples: 3,
      },
    },
    {
      name: "a confirmation back inside the band: jitter, nothing reported or stored",
      prev: healthyReported(0, 100),
      probe: { ...ok(400, 60), confirmations: [110] },
      state: healthyReported(0, 100),
      report: undefined,
    },
    {
      name: "latencySamples 1 is the seed's rule: one probe reports",
      prev: healthyReported(0, 100),
      probe: ok(151, 60),
      cfg: { ...cfg, latencySamples: 1 },
      state: {
        ...healthyReported(0),
        reported: { healthy: true, latencyMs: 151, at: at(60).toISOString(), samples: 1 },
      },
      report: {
        healthy: true,
        latencyMs: 151,
        at: at(60).toISOString(),
        reason: "LatencyChange",
        samples: 1,
      },
    },
    {
      name: "latency change of exactly 50%: not reported, no state change",
      prev: healthyReported(0, 100),
      probe: ok(150, 60),
      state: healthyReported(0, 100),
      report: undefined,
    },
    {
      name: "small latency: 20 ms floor applies (10 → 30 is not a change)",
      prev: healthyReported(0, 10),
      probe: ok(30, 60),
      state: healthyReported(0, 10),
      report: undefined,
    },
    {
      name: "small latency: 10 → 31 in three probes is a change",
      prev: healthyReported(0, 10),
      probe: { ...ok(31, 60), confirmations: [40, 35] },
      state: {
        ...healthyReported(0),
        reported: { healthy: true, latencyMs: 35, at: at(60).toISOString(), samples: 3 },
      },
      report: { healthy: true, latencyMs: 35, at: at(60).toISOString(), reason: "LatencyChange", samples: 3 },
    },
    {
      name: "latency change inside the interval: suppressed, nothing stored",
      prev: healthyReported(0, 100),
      probe: ok(400, 59),
      state: healthyReported(0, 100),
      report: undefined,
      suppressed: "LatencyChange",
    },
    {
      name: "a failed probe's latency never triggers LatencyChange",
      prev: healthyReported(0, 100),
      probe: fail(600),
      state: { ...healthyReported(0, 100), consecOK: 0, consecFail: 1 },
      report: undefined,
    },
    {
      name: "latency is rounded to whole milliseconds",
      prev: { instance: "pod-a", consecOK: 1, consecFail: 0 },
      probe: ok(12.6, 0),
      state: {
        instance: "pod-a",
        verdict: true,
        consecOK: 2,
        consecFail: 0,
        reported: { healthy: true, latencyMs: 13, at: at(0).toISOString(), samples: 1 },
      },
      report: { healthy: true, latencyMs: 13, at: at(0).toISOString(), reason: "FirstVerdict", samples: 1 },
    },
    {
      name: "a flip back inside the interval is not absorbed: the flip back is reported too",
      prev: { ...unhealthyReported(10), consecOK: 1, consecFail: 0 },
      probe: ok(100, 40),
      state: {
        instance: "pod-a",
        verdict: true,
        consecOK: 2,
        consecFail: 0,
        reported: { healthy: true, latencyMs: 100, at: at(40).toISOString(), samples: 1 },
      },
      report: {
        healthy: true,
        latencyMs: 100,
        at: at(40).toISOString(),
        reason: "ThresholdFlip",
        samples: 1,
      },
    },
    {
      name: "report time in the near future (clock skew) still rate-limits latency reports",
      prev: healthyReported(30, 100),
      probe: ok(400, 0),
      state: healthyReported(30, 100),
      report: undefined,
      suppressed: "LatencyChange",
    },
    {
      name: "an unparseable report time opens no window",
      prev: { ...healthyReported(0), reported: { healthy: true, latencyMs: 100, at: "yesterday" } },
      probe: { ...ok(500, 1), confirmations: [500, 500] },
      state: {
        ...healthyReported(0),
        reported: { healthy: true, latencyMs: 500, at: at(1).toISOString(), samples: 3 },
      },
      report: { healthy: true, latencyMs: 500, at: at(1).toISOString(), reason: "LatencyChange", samples: 3 },
    },
    {
      name: "counters above a lowered threshold are clamped",
      prev: { ...healthyReported(0), consecOK: 7 },
      probe: ok(100, 60),
      state: healthyReported(0, 100),
      report: undefined,
    },
  ] as Array<{
    name: string;
    prev: HealthState | undefined;
    probe: { ok: boolean; latencyMs: number; at: Date; confirmations?: number[] };
    cfg?: HealthThresholds;
    state: HealthState;
    report: unknown;
    suppressed?: string;
    confirm?: true;
  }>)("$name", ({ prev, probe, cfg: config, state, report, suppressed, confirm }) => {
    const result = recordProbe(prev, probe, config ?? cfg, seed);
    expect(result.state).toEqual(state);
    expect(result.report).toEqual(report);
    expect(result.suppressed).toEqual(suppressed);
    expect(result.confirm).toEqual(confirm);
  });
});

describe("steady state needs no write", () => {
  it.each([
    { name: "healthy, similar latency", prev: healthyReported(0, 100), probe: ok(120, 3600) },
    { name: "unhealthy, still failing", prev: unhealthyReported(0), probe: fail(3600) },
  ])("$name: the next state deep-equals the previous", ({ prev, probe }) => {
    const result = recordProbe(prev, probe, cfg, seed);
    expect(result.state).toStrictEqual(prev);
    expect(result.report).toBeUndefined();
    expect(result.suppressed).toBeUndefined();
  });

  it("stays identical over many probes", () => {
    let state: HealthState | undefined;
    const reports: string[] = [];
    for (let i = 0; i < 50; i++) {
      const r = recordProbe(state, ok(100 + (i % 5), i * 60), cfg, seed);
      if (r.report) reports.push(r.report.reason);
      if (i > 2) expect(r.state).toStrictEqual(state);
      state = r.state;
    }
    expect(reports).toEqual(["FirstVerdict"]);
  });
});

describe("instances and seeding", () => {
  it("a different instance resets the counters", () => {
    const prev = unhealthyReported(0);
    const result = recordProbe(prev, ok(10, 600), cfg, { instance: "pod-b" });
    expect(result.state).toEqual({ instance: "pod-b", consecOK: 1, consecFail: 0 });
    expect(result.report).toBeUndefined();
  });

  it("a different instance is seeded from an existing Healthy condition", () => {
    const result = recordProbe(unhealthyReported(0), ok(10, 600), cfg, { instance: "pod-b", healthy: true });
    expect(result.state.verdict).toBe(true);
    expect(result.state.instance).toBe("pod-b");
  });

  it("seeding from Healthy=True: failures flip only at failureThreshold", () => {
    const s: HealthSeed = {
      instance: "pod-a",
      healthy: true,
      latencyMs: 100,
      at: at(0).toISOString(),
    };
    let state: HealthState | undefined;
    const verdicts: Array<boolean | undefined> = [];
    const reports: Array<string | undefined> = [];
    for (let i = 1; i <= 4; i++) {
      const r = recordProbe(state, fail(i * 60), cfg, s);
      verdicts.push(r.state.verdict);
      reports.push(r.report?.reason);
      state = r.state;
    }
    expect(verdicts).toEqual([true, true, false, false]);
    expect(reports).toEqual([undefined, undefined, "ThresholdFlip", undefined]);
  });

  it("seeding from Healthy=True with a matching probe produces no report (no flap on handover)", () => {
    const s: HealthSeed = { instance: "pod-a", healthy: true, latencyMs: 100, at: at(0).toISOString() };
    const r = recordProbe(undefined, ok(110, 600), cfg, s);
    expect(r.report).toBeUndefined();
    expect(r.state).toEqual(healthyReported(0, 100));
  });

  it("seeding from Healthy=False: successes flip only at successThreshold", () => {
    const s: HealthSeed = { instance: "pod-a", healthy: false, at: at(0).toISOString() };
    const r1 = recordProbe(undefined, ok(10, 600), cfg, s);
    expect(r1.state.verdict).toBe(false);
    expect(r1.report).toBeUndefined();
    const r2 = recordProbe(r1.state, ok(10, 660), cfg, s);
    expect(r2.report?.reason).toBe("ThresholdFlip");
    expect(r2.report?.healthy).toBe(true);
  });

  it("a seed without latency reports the latency once (not a flip)", () => {
    const r = recordProbe(undefined, ok(40, 600), cfg, { instance: "pod-a", healthy: true });
    expect(r.report).toEqual({
      healthy: true,
      latencyMs: 40,
      at: at(600).toISOString(),
      reason: "LatencyChange",
      // Nothing reported to confirm against: one probe, as the seed reports it.
      samples: 1,
    });
  });

  it("a previous state for the same instance wins over the seed", () => {
    expect(stateFor(unhealthyReported(0), cfg, { instance: "pod-a", healthy: true })).toEqual(
      unhealthyReported(0),
    );
  });
});

describe("refusals", () => {
  const refusal = { reason: "MetadataAddress" as const, message: "no" };

  it("records a refusal once and keeps the counters", () => {
    const first = recordRefusal(healthyReported(0), refusal, cfg, seed);
    expect(first.changed).toBe(true);
    expect(first.state).toEqual({ ...healthyReported(0), refused: refusal });
    const again = recordRefusal(first.state, refusal, cfg, seed);
    expect(again.changed).toBe(false);
    expect(again.state).toStrictEqual(first.state);
  });

  it("a probe clears the refusal", () => {
    const { state } = recordRefusal(healthyReported(0), refusal, cfg, seed);
    expect(recordProbe(state, ok(100, 60), cfg, seed).state).toEqual(healthyReported(0));
  });
});

describe("projectHealth", () => {
  it.each([
    { name: "no state", state: undefined, instance: "pod-a", want: { kind: "Unknown" } },
    { name: "other instance", state: healthyReported(0), instance: "pod-b", want: { kind: "Unknown" } },
    { name: "no instance", state: healthyReported(0), instance: undefined, want: { kind: "Unknown" } },
    {
      name: "counting, no verdict yet",
      state: { instance: "pod-a", consecOK: 1, consecFail: 0 },
      instance: "pod-a",
      want: { kind: "Unknown" },
    },
    {
      name: "reported (not the raw verdict)",
      state: { ...healthyReported(0), verdict: false, consecFail: 3, consecOK: 0 },
      instance: "pod-a",
      want: { kind: "Reported", healthy: true, latencyMs: 100, at: at(0).toISOString() },
    },
    {
      name: "refused",
      state: { ...healthyReported(0), refused: { reason: "LinkLocal", message: "m" } },
      instance: "pod-a",
      want: { kind: "Refused", reason: "LinkLocal", message: "m" },
    },
  ] as Array<{ name: string; state: HealthState | undefined; instance: string | undefined; want: unknown }>)(
    "$name",
    ({ state, instance, want }) => {
      expect(projectHealth(state, instance)).toEqual(want);
    },
  );
});

describe("latencyChanged", () => {
  it.each([
    [undefined, 5, true],
    [100, 150, false],
    [100, 151, true],
    [100, 49, true],
    [100, 50, false],
    [0, 20, false],
    [0, 21, true],
    [1000, 1499, false],
  ] as Array<[number | undefined, number, boolean]>)("reported %s, now %s → %s", (reported, now, want) => {
    expect(latencyChanged(reported, now)).toBe(want);
  });
});
