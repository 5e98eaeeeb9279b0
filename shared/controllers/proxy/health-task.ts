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
  /** Least time between two status-affecting reports of one proxy; default 60 s. */
  minReportIntervalSeconds?: number;
}

/**
 * The health engine as sweep work: probe every eligible Proxy, store the counters in the
 * `crawl.kubefn.dev/health` annotation (nothing is written in steady state), and request a
 * reconcile where the reported verdict or latency changed, so the reconciler projects it.
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
      for (const o of result.outcomes) {
        if (o.result)
          ctx.metrics.observe("kubefn_probe_seconds", o.result.latencyMs / 1000, { ok: String(o.result.ok) });
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
