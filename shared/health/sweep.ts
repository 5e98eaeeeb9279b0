/**
 * The health part of the sweep: probe every eligible Proxy once, with bounded concurrency, and
 * turn the results into status.health patches and reconcile requests. Pure apart from the injected
 * prober and clock; the caller applies the patches through the Kube port and enqueues the keys.
 */

import { type KeyedSemaphore, type Semaphore, semaphore } from "../concurrency/index.ts";
import type { ObjectKey, Patch } from "../kube/index.ts";
import { fnv1a32 } from "../kube/index.ts";
import {
  describeError,
  type ProbeResult,
  type Prober,
  type ProxyEndpoint,
  screenProbeTarget,
} from "./probe.ts";
import {
  type HealthReport,
  type HealthSeed,
  type HealthState,
  type HealthThresholds,
  type RecordResult,
  recordProbe,
  recordRefusal,
} from "./state.ts";
import { decodeHealthState, healthStatusPatch } from "./stored-state.ts";
import type { ProbeAllowList, TargetPolicy } from "./target.ts";

/**
 * What the health sweep needs to know about one Proxy. The proxy controller maps its objects to
 * this shape (see `subjectFor`), so this folder does not depend on the Proxy schema.
 */
export interface HealthSubject {
  key: ObjectKey;
  /** Guards the status.health patch. */
  resourceVersion?: string;
  /** deletionTimestamp is set: never probed. */
  deleting: boolean;
  /** The stored health state (`status.health`; see stored-state.ts). */
  stored?: string;
  /** providerID (Managed) or address (External); absent → not probed. */
  instance?: string;
  /** Where the proxy listens; absent (no IP/host yet) → not probed. */
  proxy?: ProxyEndpoint;
  /**
   * The proxy's address came from kubefn's provider (Managed), not from a tenant: loopback and
   * private addresses are allowed for it (see `target.ts`). The probe URL is always a tenant's.
   */
  proxyTrusted?: boolean;
  probe: { url: string; expectedStatus: number; timeoutMs: number; intervalSeconds?: number };
  thresholds: HealthThresholds;
  /** From an existing Healthy condition (True/False) and status latency/time, for a fresh state. */
  seed?: Omit<HealthSeed, "instance">;
  /**
   * The status fields a latency report changes, exactly as the reconciler would project them
   * (latency and report time; never a condition or the phase). With it, a LatencyChange report
   * is written in the same status patch as the health state and asks for no pass; without it the
   * report asks for a pass like a verdict does.
   */
  latencyStatus?: (report: HealthReport) => Record<string, unknown>;
}

export interface ProbeAllOptions<P> {
  proxies: readonly P[];
  subjectFor: (proxy: P) => HealthSubject;
  prober: Prober;
  /** Destinations probed although loopback, private or link-local (`PROBE_ALLOWED_CIDRS`); none when unset. */
  allowList?: ProbeAllowList;
  /** Read after each probe completes; the time recorded for that probe. */
  now: () => Date;
  /** Probes in flight at once. */
  concurrency: number;
  /**
   * Probes in flight per namespace, shared with every other call given the same slots (one
   * platform instance's shards): a probe waits for its namespace's slot before it takes one of
   * `concurrency`, so one tenant's hanging targets hold at most their namespace's share and the
   * other namespaces' Proxies keep their cadence. Unbounded when unset.
   */
  namespaceSlots?: KeyedSemaphore;
  /**
   * How often the sweep runs (the cron period, 60 on Workers and Lambda). A proxy whose probe
   * interval is longer is probed on every k-th sweep only, k = round(interval / period), at a
   * phase derived from its key, so the load spreads across sweeps without any stored schedule.
   */
  sweepPeriodSeconds?: number | undefined;
  /**
   * Pause before each latency confirmation probe (see `RecordResult.confirm`), so that the samples
   * do not share one stall of the host; default {@link defaultConfirmDelayMs}. No connection is
   * held meanwhile (the Proxy's place among `concurrency` is).
   */
  confirmDelayMs?: number | undefined;
  /**
   * Start the probes evenly over this many milliseconds instead of all at once (default 0), in
   * groups of {@link spreadGroupSize} (fewer where `concurrency` is smaller). A burst measures the
   * host: thirty probes started together on a loaded host queue behind each other for tens of
   * milliseconds, past the 20 ms band, so latencies measured in a burst would flap status on their
   * own (see `state.ts`). A resumed Proxy's first probe is spread alike.
   */
  spreadMs?: number;
  /**
   * Instead of pausing, hand a Proxy that needs another probe (a recheck or a latency
   * confirmation) back as `deferred`, to be probed again after the pause by a later invocation
   * with its {@link ProbeResume} in `resume`. Nothing of it is written meanwhile. No invocation
   * then waits out a pause while its connections stand idle.
   */
  deferConfirmations?: boolean;
  /** Probes taken so far of deferred Proxies, by their place in `proxies`: they resume where they stopped. */
  resume?: readonly (ProbeResume | undefined)[] | undefined;
}

/**
 * Where a deferred Proxy stopped: the probe recorded so far (after its recheck, if one was made)
 * and the confirmation latencies; its samples are recorded at the time it resumes. Carried in a
 * queue message (written only by kubefn).
 *
 * Caveats: a recheck and a confirmation never wait on one record (a recheck is of a result against
 * the verdict, a confirmation of a latency change under a healthy one), so a Proxy resumed with a
 * recorded probe that still asks for a recheck stopped before it.
 */
export interface ProbeResume {
  result: ProbeResult;
  confirmations: number[];
}

/** One second between latency confirmations: longer than a scheduling stall, short for a shard. */
export const defaultConfirmDelayMs = 1000;

/**
 * Probes a spread starts together. Each start wakes an idle process, and the wake-up, not the
 * probe, is most of a lone probe's CPU: paced at 30 a second, a probe started alone costs 2.5
 * times the CPU of one started among 8 (`npm run bench -- probe-cpu`). Eight measured together
 * share the event loop for well under a millisecond, far inside the 20 ms band a burst of thirty
 * overruns.
 */
export const spreadGroupSize = 8;

export interface SubjectOutcome {
  key: ObjectKey;
  /** What happened to this proxy in this sweep. */
  kind: "skipped" | "refused" | "probed";
  result?: ProbeResult;
  /** Probes made after the first: latency confirmations and the recheck of a result against the verdict. */
  confirmations?: number;
  report?: HealthReport;
  state?: HealthState;
  /** Set when deferred (`deferConfirmations`): probe it again after the pause, resuming from this. */
  later?: ProbeResume;
}

export interface HealthSweepStats {
  probed: number;
  ok: number;
  failed: number;
  skipped: number;
  refused: number;
  reports: number;
  suppressed: number;
  /** Confirmation and recheck probes made (not counted in `probed`). */
  confirmations: number;
  writes: number;
}

export interface HealthSweepResult {
  /**
   * Merge patches of the stored health (`status.health`); none in steady state. A patch whose key
   * is also in `reconcileKeys` carries `unreported`: the state to store instead when the reconcile
   * request is lost (the reported markers as they were), so the next probe reports again.
   */
  statusPatches: Array<{ key: ObjectKey; patch: Patch; unreported?: HealthState }>;
  /**
   * Proxies whose status must change (a report, or a refusal that appeared, changed or cleared).
   * Enqueue a reconcile for each *after* its status.health patch succeeded: the reconciler reads the
   * stored health. On a Conflict drop both; the next sweep recomputes from what is stored.
   */
  reconcileKeys: ObjectKey[];
  stats: HealthSweepStats;
  outcomes: SubjectOutcome[];
}

/**
 * Probes every Proxy that has an address and is not being deleted.
 *
 * @example
 * const { statusPatches, reconcileKeys } = await probeAll({
 *   proxies, subjectFor: healthSubjectOf, prober, now: () => ctx.clock.now(), concurrency: 32,
 * });
 *
 * Caveats: probing is once per sweep (the cron period); a per-proxy interval longer than that is
 * the caller's filter. A prober that throws is counted as a failed probe.
 */
export async function probeAll<P>(opts: ProbeAllOptions<P>): Promise<HealthSweepResult> {
  const subjects = opts.proxies.map(opts.subjectFor);
  // Slots are held per probe, not per Proxy: a Proxy pausing between confirmation probes leaves its
  // slot to the others, so confirmations cost probes, not throughput.
  const slots = semaphore(opts.concurrency);
  const spread = opts.spreadMs ?? 0;
  const group = Math.max(1, Math.min(spreadGroupSize, opts.concurrency));
  // One pause a group, shared by its Proxies, not a timer a probe; the first group starts at once.
  const starts = new Map<number, Promise<void>>();
  const startOf = (i: number) => {
    const g = Math.floor(i / group);
    const known = starts.get(g);
    if (known) return known;
    const start = g === 0 || spread === 0 ? Promise.resolve() : sleep((g * group * spread) / subjects.length);
    starts.set(g, start);
    return start;
  };
  const outcomes = await Promise.all(
    subjects.map((s, i) => sweepOne(s, opts, slots, () => startOf(i), opts.resume?.[i])),
  );

  const statusPatches: HealthSweepResult["statusPatches"] = [];
  const reconcileKeys: ObjectKey[] = [];
  const stats: HealthSweepStats = {
    probed: 0,
    ok: 0,
    failed: 0,
    skipped: 0,
    refused: 0,
    reports: 0,
    suppressed: 0,
    confirmations: 0,
    writes: 0,
  };
  outcomes.forEach((o, i) => {
    if (o.patch)
      statusPatches.push({
        key: o.outcome.key,
        patch: o.patch,
        ...(o.reconcile && o.unreported ? { unreported: o.unreported } : {}),
      });
    if (o.reconcile) reconcileKeys.push(o.outcome.key);
    if (o.outcome.kind === "skipped") stats.skipped++;
    if (o.outcome.kind === "refused") stats.refused++;
    if (o.outcome.kind === "probed" && !opts.resume?.[i]) {
      stats.probed++;
      if (o.outcome.result?.ok) stats.ok++;
      else stats.failed++;
    }
    if (o.outcome.report) stats.reports++;
    if (o.suppressed) stats.suppressed++;
    stats.confirmations += o.outcome.confirmations ?? 0;
  });
  stats.writes = statusPatches.length;
  return { statusPatches, reconcileKeys, stats, outcomes: outcomes.map((o) => o.outcome) };
}

interface Swept {
  outcome: SubjectOutcome;
  patch?: Patch | null;
  reconcile?: boolean;
  /** With `reconcile`: the new state with the report left undone (see {@link unreportedState}). */
  unreported?: HealthState;
  suppressed?: boolean;
}

async function sweepOne<P>(
  s: HealthSubject,
  opts: ProbeAllOptions<P>,
  slots: Semaphore,
  start: () => Promise<void>,
  resume: ProbeResume | undefined,
): Promise<Swept> {
  const interval = s.probe.intervalSeconds;
  const due =
    !opts.sweepPeriodSeconds || !interval || probeDue(s.key, opts.now(), interval, opts.sweepPeriodSeconds);
  if (s.deleting || !s.proxy || !s.instance || !due) {
    return { outcome: { key: s.key, kind: "skipped" } };
  }
  const previous = decodeHealthState(s.stored);
  const seed: HealthSeed = { ...s.seed, instance: s.instance };
  const hadRefusal = previous?.instance === s.instance && previous.refused !== undefined;
  const policy: TargetPolicy = {
    ...(opts.allowList ? { allow: opts.allowList } : {}),
    ...(s.proxyTrusted ? { trusted: true } : {}),
  };
  const target = { proxy: s.proxy, url: s.probe.url, policy };

  const screened = screenProbeTarget(target, policy);
  if (!screened.allowed) {
    return refused(s, previous, screened, seed);
  }

  await start();
  // A prober that throws is a failed probe. The namespace's slot first: a namespace waiting for
  // its own slots holds none of the others'.
  const run = (fn: () => Promise<ProbeResult>) =>
    opts.namespaceSlots ? opts.namespaceSlots.run(s.key.namespace ?? "", () => slots.run(fn)) : slots.run(fn);
  const probe1 = () =>
    run(async (): Promise<ProbeResult> => {
      const startedAt = +opts.now();
      try {
        return await opts.prober.probe({
          ...target,
          expectedStatus: s.probe.expectedStatus,
          timeoutMs: s.probe.timeoutMs,
        });
      } catch (err) {
        return { ok: false, latencyMs: +opts.now() - startedAt, error: describeError(err) };
      }
    });
  let result = resume?.result ?? (await probe1());
  if (result.refused) return refused(s, previous, result.refused, seed);

  // Probes this invocation made after the first.
  let made = 0;
  const confirmations = [...(resume?.confirmations ?? [])];
  // The state `result` is folded into: `previous`, or after a recheck the state its first probe left.
  let before = previous;
  // `result` recorded as of now, with the confirmations so far (none before a recheck).
  const record = (): RecordResult =>
    recordProbe(
      before,
      { ok: result.ok, latencyMs: result.latencyMs, at: opts.now(), confirmations },
      s.thresholds,
      seed,
    );
  let recorded = record();
  // A resumed Proxy's pause was its message's delay.
  let paused = !!resume;
  const pause = async () => {
    if (paused) paused = false;
    else if (opts.deferConfirmations) return false;
    else await sleep(opts.confirmDelayMs ?? defaultConfirmDelayMs);
    return true;
  };
  const later = (): Swept => ({
    outcome: {
      key: s.key,
      kind: "probed",
      result,
      confirmations: made,
      later: { result, confirmations },
    },
  });
  // A result against the verdict is checked once more, and both probes count, as the seed counts
  // every probe: a blip followed by a success leaves the state as it was (nothing is written), a
  // proxy failing two requests of three reaches its failureThreshold (state.ts).
  if (recorded.recheck) {
    if (!(await pause())) return later();
    const again = await probe1();
    made++;
    if (!again.refused) {
      before = recorded.state;
      result = again;
      recorded = record();
    }
  }
  // A latency outside the band is confirmed by more probes before it is reported (state.ts).
  while (recorded.confirm) {
    if (!(await pause())) return later();
    const again = await probe1();
    if (!again.ok || again.refused) break;
    made++;
    confirmations.push(again.latencyMs);
    recorded = record();
  }
  // A latency report changes only latency and time: one patch, no pass (verdicts keep the pass,
  // which writes the condition, the phase and their Events).
  const latencyOnly =
    recorded.report?.reason === "LatencyChange" && s.latencyStatus && !hadRefusal
      ? recorded.report
      : undefined;
  return {
    outcome: {
      key: s.key,
      kind: "probed",
      result,
      state: recorded.state,
      ...(recorded.report ? { report: recorded.report } : {}),
      confirmations: made,
    },
    patch: healthStatusPatch(
      s.stored,
      recorded.state,
      s.resourceVersion,
      latencyOnly ? s.latencyStatus?.(latencyOnly) : undefined,
    ),
    reconcile: (recorded.report !== undefined && !latencyOnly) || hadRefusal,
    unreported: unreportedState(recorded.state, previous),
    suppressed: recorded.suppressed !== undefined,
  };
}

/**
 * `state` with what it reports undone: the reported markers and the refusal as `previous` had them
 * (000 §6: "on drop the reported markers do NOT advance → next probe retries"). The counters and
 * the verdict keep what was probed.
 */
export function unreportedState(state: HealthState, previous: HealthState | undefined): HealthState {
  const { reported: _reported, refused: _refused, ...counters } = state;
  const same = previous?.instance === state.instance;
  return {
    ...counters,
    ...(same && previous.reported ? { reported: previous.reported } : {}),
    ...(same && previous.refused ? { refused: previous.refused } : {}),
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function refused(
  s: HealthSubject,
  previous: HealthState | undefined,
  refusal: { reason: NonNullable<HealthState["refused"]>["reason"]; message: string },
  seed: HealthSeed,
): Swept {
  const { state, changed } = recordRefusal(previous, refusal, s.thresholds, seed);
  return {
    outcome: { key: s.key, kind: "refused", state },
    patch: healthStatusPatch(s.stored, state, s.resourceVersion),
    reconcile: changed,
    unreported: unreportedState(state, previous),
  };
}

/**
 * Whether a proxy probed every `intervalSeconds` is due in the sweep running at `now`, when sweeps
 * run every `sweepPeriodSeconds`. Stateless: the phase comes from a hash of the key.
 *
 * Caveats: intervals shorter than the sweep period are probed once per sweep; intervals are
 * rounded to a whole number of sweep periods.
 */
export function probeDue(
  key: ObjectKey,
  now: Date,
  intervalSeconds: number,
  sweepPeriodSeconds: number,
): boolean {
  const every = Math.max(1, Math.round(intervalSeconds / sweepPeriodSeconds));
  if (every === 1) return true;
  const slot = Math.floor(now.getTime() / 1000 / sweepPeriodSeconds);
  return (slot + fnv1a32(`${key.namespace ?? ""}/${key.name}`)) % every === 0;
}
