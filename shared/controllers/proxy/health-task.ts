import { applyHealthSweep, type Prober, probeAll, type TargetPolicy } from "../../health/index.ts";
import type { SweepTask } from "../../runtime/index.ts";
import { proxyResource } from "./api.ts";
import { proxyControllerName } from "./controller.ts";
import { proxyHealthSubject } from "./health-subject.ts";

export interface ProxyHealthTaskOptions {
  prober: Prober;
  /** Probes in flight at once. */
  concurrency: number;
  /** How often the sweep runs; a longer probe interval probes on every k-th sweep. */
  sweepPeriodSeconds: number;
  policy?: TargetPolicy;
  /** Least time between two latency reports of one proxy (flips are never held back); default 60 s. */
  minReportIntervalSeconds?: number;
}

/**
 * The health engine as sweep work: probe every eligible Proxy, store the counters in the
 * `crawl.kubefn.dev/health` annotation (nothing is written in steady state), and request a
 * reconcile where the reported verdict or latency changed, so the reconciler projects it.
 *
 * Every probe made sets two per-Proxy gauges, labelled `namespace` and `name`: the true probe
 * recency the seed moved into metrics (`kubefn_proxy_last_probe_timestamp_seconds`, since
 * `status.lastHealthCheckTime` moves only when a report changes status) and the raw result of the
 * last probe (`kubefn_proxy_probe_success`, 1 or 0; the Healthy condition is the thresholded one).
 *
 * Caveats: a gauge is process memory on the Node host and a log/metric line on Workers and
 * Lambda; a deleted Proxy's series stays on the Node host until the process restarts.
 */
export function proxyHealthTask(opts: ProxyHealthTaskOptions): SweepTask {
  return {
    name: "proxy-health",
    controller: proxyControllerName,
    async run(ctx, proxies) {
      const started = performance.now();
      const result = await probeAll({
        proxies,
        subjectFor: (p) =>
          proxyHealthSubject(p, {
            ...(opts.policy ? { policy: opts.policy } : {}),
            ...(opts.minReportIntervalSeconds
              ? { minReportIntervalSeconds: opts.minReportIntervalSeconds }
              : {}),
          }),
        prober: opts.prober,
        now: () => ctx.clock.now(),
        concurrency: opts.concurrency,
        sweepPeriodSeconds: opts.sweepPeriodSeconds,
      });
      const probedAt = ctx.clock.now().getTime() / 1000;
      for (const o of result.outcomes) {
        if (!o.result) continue;
        ctx.metrics.observe("kubefn_probe_seconds", o.result.latencyMs / 1000, { ok: String(o.result.ok) });
        // True probe recency (seed §6): status.lastHealthCheckTime moves only with a report.
        const proxy = { namespace: o.key.namespace ?? "", name: o.key.name };
        ctx.metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", probedAt, proxy);
        ctx.metrics.gauge("kubefn_proxy_probe_success", o.result.ok ? 1 : 0, proxy);
      }
      const applied = await applyHealthSweep(
        { kube: ctx.kube, queue: ctx.queue },
        proxyResource,
        proxyControllerName,
        result,
        // Writes run as wide as probes: a first sweep over a large fleet writes every counter.
        opts.concurrency,
      );
      ctx.metrics.count("kubefn_probes_total", {}, result.stats.probed);
      if (applied.failed > 0) {
        // Conflicts are recomputed next sweep; other failures (403, 422…) would stop health
        // updates silently, so they are logged and counted.
        ctx.log.error("health annotation writes failed", {
          failed: applied.failed,
          written: applied.written,
        });
        ctx.metrics.count("kubefn_health_patch_errors_total", {}, applied.failed);
      }
      return {
        probed: result.stats.probed,
        ok: result.stats.ok,
        failed: result.stats.failed,
        refused: result.stats.refused,
        reports: result.stats.reports,
        writes: applied.written,
        writeConflicts: applied.conflicts,
        writeErrors: applied.failed,
        ms: Math.round(performance.now() - started),
      };
    },
  };
}
