/**
 * The health threshold state machine (pure). One probe result in, the next state and at most one
 * report out. The sweep persists the state between runs (see `stored-state.ts`); the reconciler
 * projects the *reported* verdict into status (see {@link projectHealth}).
 *
 * Rules, from the proxy operator's health engine:
 * - The verdict flips only when `successThreshold` consecutive successes or `failureThreshold`
 *   consecutive failures are reached. Counters saturate at their threshold, so a steady state maps
 *   to an identical (deep-equal) state and needs no write.
 * - A report is due on the first verdict, when the verdict differs from the last reported one (a
 *   threshold flip), or, while healthy, when the latency has moved from the reported one by more
 *   than max(20 ms, 50 % of the reported value) — the seed's band — in *every* one of
 *   `latencySamples` (default 3) successful probes taken back to back: the probe itself and the
 *   confirmations the caller makes when {@link RecordResult.confirm} asks for them. The figure
 *   reported is their median. One probe outside the band is what scheduling jitter looks like
 *   (a loaded host stalls one probe by tens of milliseconds, rarely three in a row a second
 *   apart); the seed reported it, and every report is a status write. A real shift moves every
 *   sample and is reported by the probe that saw it, with a figure that is not an outlier.
 * - Latency reports are rate-limited to one per `minReportIntervalSeconds`, measured from the last
 *   report (the seed: "latency Δ … rate-limited to one report per MinReportInterval"). A
 *   suppressed latency report leaves the reported markers where they were, so a later probe
 *   reports it only if the latency is still different after the interval. Verdicts are never
 *   held back: the first verdict and every threshold flip are reported by the probe that reached
 *   the threshold, however recent the last report — the thresholds already are the damping, and
 *   a flip that reverted inside the interval would otherwise never reach status.
 * - A probe that goes against the verdict without reaching a threshold is checked by one more
 *   probe a second later (see {@link RecordResult.recheck}). Both count, as the seed counts every
 *   probe: a proxy failing two requests of three reaches its `failureThreshold` and leaves the
 *   crawler pool. A lone stalled probe of a healthy proxy, followed by a success, leaves the state
 *   as it was and writes nothing: the counter that runs toward the verdict already held (consecOK
 *   while healthy, consecFail while unhealthy) is kept at its threshold, since it decides nothing
 *   until the verdict flips.
 * - Counters belong to one instance (providerID, or the address for External proxies): a
 *   different instance starts fresh. A fresh state is seeded from an existing Healthy condition, so
 *   a replaced function instance or a lost `status.health` does not flap the condition.
 */

import type { RefusalReason } from "./target.ts";

export interface HealthThresholds {
  successThreshold: number;
  failureThreshold: number;
  /** Minimum spacing of latency reports, in seconds (verdict flips are never held back). The proxy operator uses 60. */
  minReportIntervalSeconds: number;
  /**
   * Successful probes in a row that must all be outside the band before a latency change is
   * reported (the median of them is reported); default {@link defaultLatencySamples}. 1 is the
   * seed's rule: every probe outside the band reports.
   */
  latencySamples?: number;
}

/** Probes that must agree on a latency change (the first probe and two confirmations). */
export const defaultLatencySamples = 3;

/** What was last reported, i.e. what status shows. Seeded markers may lack latency and time. */
export interface ReportedHealth {
  healthy: boolean;
  latencyMs?: number;
  /** ISO timestamp of the probe that was reported. */
  at?: string;
  /**
   * How many probes `latencyMs` is the median of: 3 for a latency change (the first probe and two
   * confirmations, {@link defaultLatencySamples}), 1 for a verdict (the seed's one probe). Absent in
   * markers stored before it was kept, and in seeded ones.
   */
  samples?: number;
}

export interface HealthState {
  /** The providerID or address these counters were counted for. */
  instance: string;
  /** Absent until a threshold is first reached (or a seed provides it). */
  verdict?: boolean;
  consecOK: number;
  consecFail: number;
  reported?: ReportedHealth;
  /** Set while the probe target is refused (see `target.ts`); the reconciler shows it. */
  refused?: { reason: RefusalReason; message: string };
}

export interface ProbeOutcome {
  ok: boolean;
  latencyMs: number;
  /** When the probe (or its last confirmation) completed. */
  at: Date;
  /**
   * Latencies of successful confirmation probes made right after this one, because an earlier
   * call answered `confirm`. They feed only the latency figure, never the verdict counters.
   */
  confirmations?: readonly number[];
}

/** What the sweep knows about the proxy when no usable state exists. */
export interface HealthSeed {
  instance: string;
  /** From an existing Healthy condition with status True/False; absent for Unknown or none. */
  healthy?: boolean;
  /** From status.latencyMillis. */
  latencyMs?: number;
  /** From status.lastHealthCheckTime. */
  at?: string;
}

export type ReportReason = "FirstVerdict" | "ThresholdFlip" | "LatencyChange";

export interface HealthReport {
  healthy: boolean;
  latencyMs: number;
  at: string;
  reason: ReportReason;
  /** Probes `latencyMs` is the median of (1: the seed's one probe). */
  samples: number;
}

export interface RecordResult {
  state: HealthState;
  /** Present when status should change: the reconciler must be asked to run. */
  report?: HealthReport;
  /** A latency report that was due but held back by the rate limit; re-evaluated by the next probe. */
  suppressed?: "LatencyChange";
  /**
   * Every latency so far is outside the band but fewer than `latencySamples` were taken: probe
   * again and call once more with the same `previous`, this probe and the new latency appended to
   * `confirmations`. The state is the same either way; without more samples nothing is reported.
   */
  confirm?: true;
  /**
   * This probe went against the verdict without reaching a threshold (a single failure of a
   * healthy proxy, say): probe once more and fold that probe into the state returned here, so
   * both count, as the seed counts every probe.
   */
  recheck?: true;
}

/**
 * Folds one probe result into the state.
 *
 * @example
 * const { state, report } = recordProbe(previous, { ok: true, latencyMs: 12, at: now }, thresholds, { instance: ip });
 * if (report) reconcileKeys.push(key);
 *
 * Caveats: a first verdict or a flip reports the latency of the probe just made; a failed probe's
 * latency (often the timeout) is reported with a flip but never triggers a LatencyChange, and
 * neither does any probe while the verdict is unhealthy. When the reported latency is unknown (a
 * seeded state) the first successful probe reports at once, without confirmations.
 */
export function recordProbe(
  previous: HealthState | undefined,
  probe: ProbeOutcome,
  cfg: HealthThresholds,
  seed: HealthSeed,
): RecordResult {
  const base = stateFor(previous, cfg, seed);
  const successThreshold = Math.max(1, cfg.successThreshold);
  const failureThreshold = Math.max(1, cfg.failureThreshold);
  let { verdict } = base;
  let consecOK: number;
  let consecFail: number;
  if (probe.ok) {
    // While healthy the success count decides nothing: held at its threshold.
    consecOK = verdict === true ? successThreshold : Math.min(base.consecOK + 1, successThreshold);
    consecFail = 0;
    if (consecOK >= successThreshold) verdict = true;
  } else {
    consecFail = verdict === false ? failureThreshold : Math.min(base.consecFail + 1, failureThreshold);
    consecOK = 0;
    if (consecFail >= failureThreshold) verdict = false;
  }

  const latencyMs = whole(probe.latencyMs);
  const samples = [latencyMs, ...(probe.confirmations ?? []).map(whole)];
  const reason = verdict === undefined ? undefined : dueReason(base.reported, verdict, probe.ok, samples);
  let reported = base.reported;
  let report: HealthReport | undefined;
  let suppressed: "LatencyChange" | undefined;
  let confirm: true | undefined;
  if (reason && verdict !== undefined) {
    const needed = Math.max(1, cfg.latencySamples ?? defaultLatencySamples);
    if (
      reason === "LatencyChange" &&
      withinInterval(base.reported?.at, probe.at, cfg.minReportIntervalSeconds)
    ) {
      suppressed = reason;
    } else if (
      reason === "LatencyChange" &&
      base.reported?.latencyMs !== undefined &&
      samples.length < needed
    ) {
      confirm = true;
    } else {
      const at = probe.at.toISOString();
      const counted = reason === "LatencyChange" ? samples : [latencyMs];
      const figure = median(counted);
      reported = { healthy: verdict, latencyMs: figure, at, samples: counted.length };
      report = { healthy: verdict, latencyMs: figure, at, reason, samples: counted.length };
    }
  }

  const state = makeState({ instance: base.instance, verdict, consecOK, consecFail, reported });
  const recheck = base.verdict !== undefined && probe.ok !== base.verdict && verdict === base.verdict;
  return {
    state,
    ...(recheck ? { recheck: true as const } : {}),
    ...(report ? { report } : {}),
    ...(suppressed ? { suppressed } : {}),
    ...(confirm ? { confirm } : {}),
  };
}

/**
 * Records that the target was refused without probing. Counters and verdict are kept; `changed`
 * says whether the refusal is new or different, i.e. whether the reconciler must run.
 */
export function recordRefusal(
  previous: HealthState | undefined,
  refused: { reason: RefusalReason; message: string },
  cfg: HealthThresholds,
  seed: HealthSeed,
): { state: HealthState; changed: boolean } {
  const base = stateFor(previous, cfg, seed);
  const changed = base.refused?.reason !== refused.reason || base.refused.message !== refused.message;
  return {
    state: makeState({ ...base, refused: { reason: refused.reason, message: refused.message } }),
    changed,
  };
}

/** What the reconciler shows for the current instance. */
export type HealthProjection =
  | { kind: "Unknown" }
  | { kind: "Refused"; reason: RefusalReason; message: string }
  | { kind: "Reported"; healthy: boolean; latencyMs?: number; at?: string };

/**
 * The reconciler's view of a persisted state: the last *reported* verdict (never the raw counters,
 * so status moves only when a report was emitted), or the refusal, for the proxy's current
 * instance. A state counted for another instance reads as Unknown.
 */
export function projectHealth(
  state: HealthState | undefined,
  instance: string | undefined,
): HealthProjection {
  if (!state || instance === undefined || state.instance !== instance) return { kind: "Unknown" };
  if (state.refused) return { kind: "Refused", reason: state.refused.reason, message: state.refused.message };
  if (!state.reported) return { kind: "Unknown" };
  return { kind: "Reported", ...state.reported };
}

/** The state to build on: the previous one for the same instance, else a fresh, seeded one. */
export function stateFor(
  previous: HealthState | undefined,
  cfg: HealthThresholds,
  seed: HealthSeed,
): HealthState {
  if (previous && previous.instance === seed.instance) return previous;
  if (seed.healthy === undefined) return makeState({ instance: seed.instance, consecOK: 0, consecFail: 0 });
  return makeState({
    instance: seed.instance,
    verdict: seed.healthy,
    consecOK: seed.healthy ? Math.max(1, cfg.successThreshold) : 0,
    consecFail: seed.healthy ? 0 : Math.max(1, cfg.failureThreshold),
    reported: { healthy: seed.healthy, latencyMs: seed.latencyMs, at: seed.at },
  });
}

function dueReason(
  reported: ReportedHealth | undefined,
  verdict: boolean,
  probeOk: boolean,
  samples: readonly number[],
): ReportReason | undefined {
  if (!reported) return "FirstVerdict";
  if (reported.healthy !== verdict) return "ThresholdFlip";
  if (verdict && probeOk && samples.every((ms) => latencyChanged(reported.latencyMs, ms)))
    return "LatencyChange";
  return undefined;
}

function whole(ms: number): number {
  return Math.max(0, Math.round(ms));
}

/** The middle sample (the lower middle of an even count), so the figure is one that was measured. */
function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** True when `latencyMs` differs from the reported value by more than max(20 ms, 50 %). */
export function latencyChanged(reportedMs: number | undefined, latencyMs: number): boolean {
  if (reportedMs === undefined) return true;
  return Math.abs(latencyMs - reportedMs) > Math.max(20, 0.5 * reportedMs);
}

/**
 * Whether `now` is inside the rate-limit window opened by a report at `reportedAt`. An unknown or
 * unparseable time opens no window; a report time in the future by less than the interval (clock
 * skew between function instances) still counts as recent.
 */
function withinInterval(reportedAt: string | undefined, now: Date, intervalSeconds: number): boolean {
  if (reportedAt === undefined) return false;
  const t = Date.parse(reportedAt);
  if (Number.isNaN(t)) return false;
  const elapsedMs = now.getTime() - t;
  const windowMs = intervalSeconds * 1000;
  return elapsedMs < windowMs && elapsedMs > -windowMs;
}

/** Builds a state with a fixed key order and no undefined fields, so equal states encode equally. */
export function makeState(s: HealthState): HealthState {
  const out = { instance: s.instance } as HealthState;
  if (s.verdict !== undefined) out.verdict = s.verdict;
  out.consecOK = s.consecOK;
  out.consecFail = s.consecFail;
  if (s.reported) {
    const r: ReportedHealth = { healthy: s.reported.healthy };
    if (s.reported.latencyMs !== undefined) r.latencyMs = s.reported.latencyMs;
    if (s.reported.at !== undefined) r.at = s.reported.at;
    if (s.reported.samples !== undefined) r.samples = s.reported.samples;
    out.reported = r;
  }
  if (s.refused) out.refused = { reason: s.refused.reason, message: s.refused.message };
  return out;
}
