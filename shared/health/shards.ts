/**
 * Health probes fanned out through the queue: the sweep cuts the due Proxies into probe shards,
 * each a message (delayed to its phase in the minute) that one invocation probes within its
 * platform budget.
 */
import { fnv1a32, type ObjectKey } from "../kube/index.ts";
import { sharedTimer } from "./deadlines.ts";
import type { ProbeResult, Prober, ProbeTarget } from "./probe.ts";
import type { HealthSubject } from "./sweep.ts";

/** One probe-shard message: the Proxies (as listed) to probe after `delaySeconds`. */
export interface ProbeShard<P> {
  delaySeconds: number;
  objects: P[];
}

export interface PlanProbeShardsOptions<P> {
  proxies: readonly P[];
  subjectFor: (proxy: P) => HealthSubject;
  now: Date;
  /** How often the sweep runs, seconds; each sweep plans this much time ahead. */
  sweepPeriodSeconds: number;
  /** Proxies per shard: the platform's per-invocation budget (connections, subrequests). */
  shardSize: number;
}

/**
 * Which Proxies to probe in the next sweep period, and when (pure). A Proxy is probed every
 * `intervalSeconds` on the wall clock ({@link probeDelays}): below the sweep period several times
 * per sweep (a 30 s interval twice a minute), above it in some sweeps only (90 s: in two sweeps of
 * three). The phase is the FNV-1a hash of the key modulo the interval, so probes spread over the
 * minute and a Proxy keeps its rhythm across sweeps without any stored schedule. Proxies with the same delay share shards of at most `shardSize`.
 *
 * Caveats: delays are whole seconds. A Proxy without an address, an instance, or being deleted
 * is not planned. A shard delayed by d carries the object as listed d seconds earlier; its
 * `status.health` write is guarded by that resourceVersion, so a change in between costs that one
 * report (recomputed at the next probe), never a wrong one.
 */
export function planProbeShards<P>(opts: PlanProbeShardsOptions<P>): ProbeShard<P>[] {
  const planner = probeShardPlanner(opts);
  const shards = [...planner.add(opts.proxies), ...planner.flush()];
  // Stable: within one delay, shards keep list order.
  return shards.sort((a, b) => a.delaySeconds - b.delaySeconds);
}

/** {@link planProbeShards} fed page by page. */
export interface ProbeShardPlanner<P> {
  /** Plans a page of Proxies; returns the shards it filled (each exactly `shardSize`). */
  add(proxies: readonly P[]): ProbeShard<P>[];
  /** The partly filled shards left, by delay; the planner is empty afterwards. */
  flush(): ProbeShard<P>[];
}

/**
 * Plans probe shards page by page, as {@link planProbeShards} does for a whole list: a shard is
 * handed out as soon as it is full, so only one partly filled shard per delay is kept between
 * pages — at most `period × (shardSize − 1)` Proxies (2,340 for a 60 s period and shards of 40),
 * whatever the fleet's size.
 */
export function probeShardPlanner<P>(opts: Omit<PlanProbeShardsOptions<P>, "proxies">): ProbeShardPlanner<P> {
  const period = Math.max(1, Math.round(opts.sweepPeriodSeconds));
  const size = Math.max(1, Math.floor(opts.shardSize));
  const byDelay = new Map<number, P[]>();
  return {
    add(proxies) {
      const full: ProbeShard<P>[] = [];
      for (const proxy of proxies) {
        const s = opts.subjectFor(proxy);
        if (s.deleting || !s.proxy || !s.instance) continue;
        for (const delay of probeDelays(s.key, s.probe.intervalSeconds, opts.now, period)) {
          const at = byDelay.get(delay) ?? [];
          at.push(proxy);
          if (at.length >= size) {
            full.push({ delaySeconds: delay, objects: at });
            byDelay.delete(delay);
          } else byDelay.set(delay, at);
        }
      }
      return full;
    },
    flush() {
      const rest = [...byDelay.entries()]
        .sort(([a], [b]) => a - b)
        .map(([delaySeconds, objects]) => ({ delaySeconds, objects }));
      byDelay.clear();
      return rest;
    },
  };
}

/**
 * The delays (whole seconds after `now`) at which a Proxy is probed in the sweep period that
 * starts at `now`. Its probes fall on the wall clock's seconds `t ≡ phase (mod interval)`, so
 * consecutive sweeps continue one rhythm: 45 s stays 45 s across the minute, 90 s is every 90 s,
 * 7 s is every 7 s — whatever the period.
 *
 * Caveats: sweep periods must tile the clock (each sweep plans `[now, now + period)`); a sweep
 * that runs a second late or early may plan a probe at the seam twice or not at all.
 */
export function probeDelays(
  key: ObjectKey,
  intervalSeconds: number | undefined,
  now: Date,
  periodSeconds: number,
): number[] {
  const interval = Math.max(1, Math.round(intervalSeconds ?? periodSeconds));
  const phase = fnv1a32(`${key.namespace ?? ""}/${key.name}`) % interval;
  const start = Math.floor(now.getTime() / 1000);
  const delays: number[] = [];
  // The first second at or after `start` on the Proxy's rhythm, then every interval.
  for (let at = (((phase - start) % interval) + interval) % interval; at < periodSeconds; at += interval) {
    delays.push(at);
  }
  return delays;
}

/**
 * A prober that keeps at most `limit` probes in flight across every shard it serves (one
 * platform instance: on Workers, 6 connections), and that never lets a probe outlive its own
 * deadline: a probe that hangs past `timeoutMs` (plus `graceMs`) resolves as a failed probe, so
 * no shard, and nothing after it, waits on it. Its probes' deadlines, their own timeouts given to
 * `inner` and these, share one timer ({@link sharedTimer}): no timer is armed or cleared a probe.
 *
 * Caveats: the slot of a hung probe is released at its deadline, though the platform may keep
 * the socket until it closes it.
 */
export function boundedProber(
  inner: Prober,
  limit: number,
  graceMs = 250,
): Prober & { inFlight(): number; peak(): number } {
  let active = 0;
  let peak = 0;
  const waiting: (() => void)[] = [];
  const timer = sharedTimer();
  const acquire = async () => {
    while (active >= Math.max(1, limit)) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    peak = Math.max(peak, active);
  };
  const release = () => {
    active--;
    waiting.shift()?.();
  };
  return {
    inFlight: () => active,
    peak: () => peak,
    async probe(req: ProbeTarget): Promise<ProbeResult> {
      await acquire();
      const started = Date.now();
      try {
        // The first to settle wins: the probe, or the deadline (no `Promise.race` a probe).
        return await new Promise<ProbeResult>((resolve, reject) => {
          const cancel = timer(req.timeoutMs + graceMs, () =>
            resolve({
              ok: false,
              latencyMs: Date.now() - started,
              error: `probe deadline of ${req.timeoutMs} ms passed`,
            }),
          );
          inner.probe(req, timer).then(
            (result) => {
              cancel();
              resolve(result);
            },
            (err: unknown) => {
              cancel();
              reject(err);
            },
          );
        });
      } finally {
        release();
      }
    },
  };
}
