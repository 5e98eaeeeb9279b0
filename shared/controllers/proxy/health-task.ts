import { keyedSemaphore } from "../../concurrency/index.ts";
import {
  applyHealthSweep,
  boundedProber,
  defaultConfirmDelayMs,
  type HealthSubject,
  type ProbeAllowList,
  type ProbeResume,
  type Prober,
  type ProbeShard,
  probeAll,
  probeShardPlanner,
} from "../../health/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import type { Context, JobMessage, SweepTask } from "../../runtime/index.ts";
import { proxyResource } from "./api.ts";
import { proxyControllerName } from "./controller.ts";
import { proxyHealthSubject, proxyProbeView } from "./health-subject.ts";
import { listedProxySeries } from "./probe-series.ts";

export interface ProxyHealthTaskOptions {
  prober: Prober;
  /** Loopback, private and link-local destinations admitted (`PROBE_ALLOWED_CIDRS`); none when unset. */
  allowList?: ProbeAllowList;
  /** Probes in flight at once (per platform instance when fanned out). */
  concurrency: number;
  /**
   * Probes in flight per namespace, across every sweep and shard of this task (one platform
   * instance): one tenant's hanging targets hold at most this many of `concurrency`, so the other
   * namespaces' Proxies keep their cadence. Default: half of `concurrency`, rounded up: one namespace
   * alone keeps half the throughput it had without a budget, and half the slots stay for the others.
   */
  namespaceConcurrency?: number;
  /** How often the sweep runs; a longer probe interval probes on every k-th sweep. */
  sweepPeriodSeconds: number;
  /** Least time between two latency reports of one proxy (flips are never held back); default 60 s. */
  minReportIntervalSeconds?: number;
  /**
   * Fan the probes out through the queue: the sweep only plans probe shards of at most
   * `shardSize` Proxies, each a message delayed to its phase in the period, and the queue
   * consumer probes them (`probeShardTask`). Without it the sweep probes in process, once per
   * sweep.
   */
  fanOut?: { shardSize: number };
  /** Pause before each latency confirmation probe; default 1 s (`probeAll`). Tests use 0. */
  confirmDelayMs?: number;
  /**
   * Whose the probe slots (`concurrency`, `namespaceConcurrency`) are: the instance's, shared by
   * every shard it runs (the default), or each invocation's (`"invocation"`: the Worker), told
   * apart by the invocation's reads (`ctx.memo`, one per `consume`). workerd cancels a request
   * that waits for a promise another request settles (`"hung and would never generate a
   * response"`): a shard waiting for a slot another invocation holds is cancelled, its whole batch
   * retried, and the slot then handed to it is lost, until every probe of the isolate waits
   * forever. Cloudflare's 6 connections are each invocation's anyway.
   */
  slotScope?: "instance" | "invocation";
}

/** A namespace's share of the probe slots when none is set: half, rounded up. */
export const defaultNamespaceConcurrency = (concurrency: number): number =>
  Math.max(1, Math.ceil(concurrency / 2));

/** The shard task name the proxy controller registers its probe handler under. */
export const probeShardTask = "probe";

/**
 * A probe shard delivered later than this after its due time sheds the Proxies whose next
 * shard is nearer than this one was due (lateness above half their interval): a backlog then
 * costs no double probes. A Proxy with a longer interval is still probed, late.
 */
export const SHED_AFTER_MS = 15_000;

/**
 * The health engine as sweep work: probe every eligible Proxy, store the counters in
 * `status.health` (nothing is written in steady state), and request a reconcile where the
 * reported verdict changed, so the reconciler projects it. A latency change (confirmed by three
 * probes in a row, see `recordProbe`) is written with the counters in one status patch — its
 * latency and time, projected as the reconciler would — and needs no pass.
 *
 * With `fanOut`, the sweep sends probe shards instead (see {@link planProbeShards}: intervals
 * below a minute are honoured by delayed shards, phases jittered per Proxy) and `handleShard` does
 * the probing where the queue delivers them; a hung probe spends only its own deadline.
 *
 * Every probe made sets two per-Proxy gauges, labelled `namespace` and `name`: the true probe
 * recency the seed moved into metrics (`kubefn_proxy_last_probe_timestamp_seconds`, since
 * `status.lastHealthCheckTime` moves only when a report changes status) and the raw result of the
 * last probe (`kubefn_proxy_probe_success`, 1 or 0; the Healthy condition is the thresholded one).
 *
 * Caveats: a gauge is process memory on the Node host and a log/metric line on Workers and
 * Lambda. On the Node host a deleted Proxy's series go with its absent pass, or at the end of the
 * first sweep that no longer lists it (`listedProxySeries`).
 */
export function proxyHealthTask(opts: ProxyHealthTaskOptions): SweepTask & {
  handleShard(
    ctx: Context,
    objects: readonly KubeObject[],
    data?: unknown,
    job?: { due?: number },
  ): Promise<Record<string, number>>;
} {
  const slotsOf = () => ({
    prober: boundedProber(opts.prober, opts.concurrency),
    namespaceSlots: keyedSemaphore(
      opts.namespaceConcurrency ?? defaultNamespaceConcurrency(opts.concurrency),
    ),
  });
  const instanceSlots = slotsOf();
  const invocationSlots = new WeakMap<object, ReturnType<typeof slotsOf>>();
  /** The slots `ctx`'s probes take (see {@link ProxyHealthTaskOptions.slotScope}). */
  const slotsFor = (ctx: Context) => {
    if (opts.slotScope !== "invocation" || !ctx.memo) return instanceSlots;
    let slots = invocationSlots.get(ctx.memo);
    if (!slots) {
      slots = slotsOf();
      invocationSlots.set(ctx.memo, slots);
    }
    return slots;
  };
  // One subject per listed object: the sweep's planner and each shard it sends (two a sweep at a
  // 30 s interval on the Node host, whose queue holds the listed objects themselves) read the
  // same object, so the Proxy schema's parse is paid once a sweep, not at every probe.
  const subjects = new WeakMap<KubeObject, HealthSubject>();
  // A listed Proxy whose health this task has written since: the object the write returned. The
  // sweep's next shard of it (30 s later, the same listed copy) then writes with the current
  // resourceVersion and stored state, instead of meeting a Conflict, reading it again and
  // probing it once more.
  const written = new WeakMap<KubeObject, KubeObject>();
  const subjectOptions = opts.minReportIntervalSeconds
    ? { minReportIntervalSeconds: opts.minReportIntervalSeconds }
    : {};
  // What a shard carries of a listed Proxy (see `proxyProbeView`): one view per listed object, so
  // the two shards of a 30 s Proxy on the Node host share it, and its subject is the listed one's.
  const views = new WeakMap<KubeObject, KubeObject>();
  const viewOf = (listed: KubeObject): KubeObject => {
    let view = views.get(listed);
    if (!view) {
      view = proxyProbeView(listed);
      views.set(listed, view);
      const subject = subjects.get(listed);
      if (subject) subjects.set(view, subject);
    }
    return view;
  };
  const subjectFor = (listed: KubeObject): HealthSubject => {
    const p = written.get(listed) ?? listed;
    let subject = subjects.get(p);
    if (!subject) {
      subject = proxyHealthSubject(p, subjectOptions);
      subjects.set(p, subject);
    }
    return subject;
  };

  const probeAndApply = async (
    ctx: Context,
    proxies: readonly KubeObject[],
    dueFilter: boolean,
    retryConflicts = false,
    resume?: ProbeResume[],
  ): Promise<Record<string, number>> => {
    const started = performance.now();
    const { prober, namespaceSlots } = slotsFor(ctx);
    const result = await probeAll({
      proxies,
      subjectFor,
      prober,
      ...(opts.allowList ? { allowList: opts.allowList } : {}),
      now: () => ctx.clock.now(),
      concurrency: opts.concurrency,
      namespaceSlots,
      sweepPeriodSeconds: dueFilter ? opts.sweepPeriodSeconds : undefined,
      confirmDelayMs: opts.confirmDelayMs,
      // A shard's Proxies share one second: spread over it in small groups (`spreadGroupSize`), not as a
      // burst as wide as the prober's slots (the confirmation pause is that scale, and 0 in tests).
      // Fewer slots make a smaller burst, so the spread shrinks with them below 12: half a second
      // with Workers' 6, where a local queue runs one batch of 10 shards at a time and 10,000
      // Proxies at 30 s need a batch every 1.2 s.
      spreadMs: dueFilter
        ? 0
        : (opts.confirmDelayMs ?? defaultConfirmDelayMs) * Math.min(1, opts.concurrency / 12),
      // Fanned out, a shard never pauses: a Proxy needing another probe goes into a shard
      // delayed by the pause, so the invocation's 6 connections serve the next shard meanwhile.
      deferConfirmations: !!opts.fanOut,
      resume,
    });
    const deferred: KubeObject[] = [];
    const resumes: ProbeResume[] = [];
    const probedAt = ctx.clock.now().getTime() / 1000;
    result.outcomes.forEach((o, i) => {
      if (o.later) {
        deferred.push(proxies[i]!);
        resumes.push(o.later);
      }
      if (!o.result) return;
      ctx.metrics.observe("kubefn_probe_duration_seconds", o.result.latencyMs / 1000, {
        ok: String(o.result.ok),
      });
      // True probe recency (seed §6): status.lastHealthCheckTime moves only with a report.
      const proxy = { namespace: o.key.namespace ?? "", name: o.key.name };
      ctx.metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", probedAt, proxy);
      ctx.metrics.gauge("kubefn_proxy_probe_success", o.result.ok ? 1 : 0, proxy);
    });
    const applied = await applyHealthSweep(
      { kube: ctx.kube, queue: ctx.queue },
      proxyResource,
      proxyControllerName,
      result,
      // Writes run as wide as probes: a first sweep over a large fleet writes every counter.
      opts.concurrency,
    );
    if (applied.stored.length > 0) {
      const listed = new Map(
        proxies.map((p) => [keyOf(p.metadata.namespace ?? "", p.metadata.name ?? ""), p]),
      );
      for (const { key, object } of applied.stored) {
        const p = listed.get(keyOf(key.namespace ?? "", key.name));
        if (p) written.set(p, object);
      }
    }
    ctx.metrics.count("kubefn_probes_total", {}, result.stats.probed);
    if (applied.failed > 0) {
      // Conflicts are recomputed next sweep; other failures (403, 422…) would stop health
      // updates silently, so they are logged and counted.
      ctx.log.error("health status writes failed", { failed: applied.failed, written: applied.written });
      ctx.metrics.count("kubefn_health_patch_errors_total", {}, applied.failed);
    }
    if (applied.reconcilesLost > 0) {
      // Their markers were stored back: the next probe of each reports again (000 §6).
      ctx.log.warn("health reports not sent: the queue refused their passes; the next probe retries", {
        lost: applied.reconcilesLost,
      });
      ctx.metrics.count("kubefn_health_reports_lost_total", {}, applied.reconcilesLost);
    }
    let retried: Record<string, number> | undefined;
    if (retryConflicts && applied.conflictKeys.length > 0) {
      // A shard carries the Proxies as listed up to a minute ago; a pass may have written one
      // since. Only those are read again and probed once more.
      const fresh: KubeObject[] = [];
      for (const key of applied.conflictKeys) {
        try {
          fresh.push(await ctx.kube.get(proxyResource, key));
        } catch {
          // Gone or unreadable: the next sweep decides.
        }
      }
      retried = await probeAndApply(ctx, fresh, false, false);
    }
    // Sent last: if it fails, the executor logs and counts the shard's failure; what was probed
    // is written already, and a Proxy that was to be probed again is probed at its next turn.
    if (deferred.length > 0)
      await ctx.queue.send(
        [shardMessage(`re${ctx.random()}`, deferred, resumes)],
        Math.ceil((opts.confirmDelayMs ?? defaultConfirmDelayMs) / 1e3),
      );
    const counts: Record<string, number> = {
      ...result.stats,
      writes: applied.written,
      writeErrors: applied.failed,
      // Conflicts of the first round were retried; what is left is the retry's.
      writeConflicts: retried ? 0 : applied.conflicts,
      retried: retried?.probed ?? 0,
    };
    // The retry's own `retried` is 0 and its `ms` is overwritten below.
    for (const k in retried) counts[k] = (counts[k] ?? 0) + retried[k]!;
    counts.ms = Math.round(performance.now() - started);
    return counts;
  };

  return {
    name: "proxy-health",
    controller: proxyControllerName,
    start(ctx, _memo, info) {
      const series = listedProxySeries(ctx.metrics);
      if (!opts.fanOut) {
        // In process: each page is probed (bounded concurrency) before the next is listed.
        const totals: Record<string, number> = {};
        return {
          async page(proxies) {
            series.page(proxies);
            for (const [k, v] of Object.entries(await probeAndApply(ctx, proxies, true)))
              totals[k] = (totals[k] ?? 0) + v;
          },
          async finish() {
            series.finish();
            return totals;
          },
        };
      }
      // Planned from the sweep's scheduled instant, so sweeps tile the clock whatever the cron's
      // jitter; each shard's delay is counted from it too, not from when the listing ended.
      const plannedFrom = info?.at ?? ctx.clock.now();
      const planner = probeShardPlanner({
        subjectFor,
        now: plannedFrom,
        sweepPeriodSeconds: opts.sweepPeriodSeconds,
        shardSize: opts.fanOut.shardSize,
      });
      const counts = { shards: 0, planned: 0, shardErrors: 0 };
      const shardSent = (shard: ProbeShard<KubeObject>) => {
        counts.shards++;
        counts.planned += shard.objects.length;
      };
      const shardNotSent = (shards: readonly ProbeShard<KubeObject>[], first: number, err: unknown) => {
        // Those Proxies are probed at the next sweep; their health state is unchanged meanwhile.
        counts.shardErrors += shards.length;
        ctx.log.error("probe shard not sent", {
          shard: first,
          ...(shards.length > 1 ? { shards: shards.length } : {}),
          proxies: shards.reduce((n, s) => n + s.objects.length, 0),
          error: String(err),
        });
        ctx.metrics.count(
          "kubefn_sweep_errors_total",
          { controller: proxyControllerName, stage: "probe-shard" },
          shards.length,
        );
      };
      // Named by its slot, not its sweep: where a queue keys messages by name (the Node host), a
      // shard still waiting from the last sweep is replaced by this one's, so a host that falls
      // behind holds one sweep of shards, not every sweep's.
      const entryOf = (shard: ProbeShard<KubeObject>, i: number) => {
        const due = plannedFrom.getTime() + shard.delaySeconds * 1000;
        return {
          message: shardMessage(`${shard.delaySeconds}-${i}`, shard.objects, undefined, due),
          delaySeconds: Math.max(0, Math.round((due - ctx.clock.now().getTime()) / 1000)),
        };
      };
      const sendShards = async (shards: readonly ProbeShard<KubeObject>[]) => {
        const first = counts.shards + counts.shardErrors;
        if (ctx.queue.sendEach && shards.length > 1) {
          // Each at its own delay, in as few calls as the queue takes (SQS: ten to a call).
          try {
            await ctx.queue.sendEach(shards.map((shard, k) => entryOf(shard, first + k)));
            for (const shard of shards) shardSent(shard);
          } catch (err) {
            shardNotSent(shards, first, err);
          }
          return;
        }
        for (const shard of shards) {
          const i = counts.shards + counts.shardErrors;
          try {
            const { message, delaySeconds } = entryOf(shard, i);
            await ctx.queue.send([message], delaySeconds);
            shardSent(shard);
          } catch (err) {
            shardNotSent([shard], i, err);
          }
        }
      };
      return {
        // A full shard goes out as soon as a page fills it; partial ones wait for the last page.
        page: (proxies) => {
          series.page(proxies);
          // The planner keeps each Proxy's probe view, not the listed object: a partly filled shard
          // waits for the last page (at 10,000 Proxies every 30 s in shards of 400, all of them
          // do), and the listed objects are then dropped page by page.
          return sendShards(planner.add(proxies.map(viewOf)));
        },
        async finish() {
          series.finish();
          await sendShards(planner.flush());
          ctx.metrics.count("kubefn_probe_shards_total", {}, counts.shards);
          return counts;
        },
      };
    },
    async handleShard(ctx, objects, data, job = {}) {
      const resume = data as ProbeResume[] | undefined;
      const lateMs = job.due === undefined ? 0 : ctx.clock.now().getTime() - job.due;
      if (resume || lateMs <= SHED_AFTER_MS) return probeAndApply(ctx, objects, false, true, resume);
      // Late: a Proxy whose next shard is nearer than this one was due is left to that one.
      const kept = objects.filter((p) => {
        const interval = subjectFor(p).probe.intervalSeconds ?? opts.sweepPeriodSeconds;
        return lateMs <= (interval * 1000) / 2;
      });
      const shed = objects.length - kept.length;
      if (shed > 0) ctx.metrics.count("kubefn_probes_shed_total", {}, shed);
      const counts = kept.length > 0 ? await probeAndApply(ctx, kept, false, true) : {};
      return { ...counts, shed, lateMs: Math.round(lateMs) };
    },
  };
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

const shardMessage = (id: string, objects: KubeObject[], data?: ProbeResume[], due?: number): JobMessage => ({
  kind: "job",
  job: {
    controller: proxyControllerName,
    task: probeShardTask,
    slot: id,
    objects,
    ...(data ? { data } : {}),
    ...(due === undefined ? {} : { due }),
  },
});
