import { listAll } from "../../../kube/index.ts";
import type { SweepTask } from "../../../runtime/index.ts";
import { proxyResource } from "../api.ts";
import { proxyControllerName } from "../controller.ts";
import { providerInstances } from "../drift.ts";
import { ownerTagKey, type ProvidersByName } from "../providers/index.ts";
import { type AgedInstance, defaultOrphanGraceSeconds, findOrphans } from "./find-orphans.ts";

export interface OrphanSweepOptions {
  /** Every provider whose instances may be orphaned; each is listed by the managed-by tag. */
  providers: ProvidersByName;
  /** Minimum instance age before collection; default {@link defaultOrphanGraceSeconds} (600). */
  graceSeconds?: number;
}

/**
 * Sweep task deleting provider instances whose Proxy no longer exists (a Proxy deleted while its
 * finalizer was bypassed, a crash between create and the status write of a Proxy since deleted).
 * Lists every provider by `crawl.kubefn.dev/managed-by=kubefn`, picks the orphans with
 * {@link findOrphans} against the swept Proxies, confirms them against a fresh list of Proxies,
 * and deletes them. Counts `kubefn_orphans_collected_total{provider}`.
 *
 * Caveats: a provider whose list or delete fails is logged and counted (`failed`) and the others
 * proceed; its orphans wait for the next sweep. Instances without the owner tag are never touched.
 */
export function orphanSweepTask(opts: OrphanSweepOptions): SweepTask {
  const graceSeconds = opts.graceSeconds ?? defaultOrphanGraceSeconds;
  return {
    name: "proxy-orphans",
    controller: proxyControllerName,
    async run(ctx, primaries, memo) {
      const now = ctx.clock.now();
      const counts = { instances: 0, orphans: 0, collected: 0, failed: 0 };
      const candidates: { provider: string; instance: AgedInstance }[] = [];
      for (const [name, provider] of Object.entries(opts.providers).sort(([a], [b]) => (a < b ? -1 : 1))) {
        try {
          const instances = await providerInstances(memo, name, provider);
          counts.instances += instances.length;
          for (const instance of findOrphans(instances, primaries, now, graceSeconds)) {
            candidates.push({ provider: name, instance });
          }
        } catch (err) {
          counts.failed++;
          ctx.log.error("orphan sweep: listing instances failed", { provider: name, error: String(err) });
          ctx.metrics.count("kubefn_orphan_sweep_errors_total", { provider: name, stage: "list" });
        }
      }
      if (candidates.length === 0) return counts;

      // A Proxy created after the sweep listed them may already own an instance: check again.
      const current = await listAll(ctx.kube, proxyResource);
      const confirmed = new Set(
        findOrphans(
          candidates.map((c) => c.instance),
          current,
          now,
          graceSeconds,
        ),
      );
      for (const { provider, instance } of candidates) {
        if (!confirmed.has(instance)) continue;
        counts.orphans++;
        try {
          await opts.providers[provider]?.delete(instance.id, {
            owner: instance.tags[ownerTagKey] ?? "",
            uid: instance.uid,
          });
          counts.collected++;
          ctx.metrics.count("kubefn_orphans_collected_total", { provider });
          ctx.log.info("collected orphaned instance", { provider, id: instance.id, tags: instance.tags });
        } catch (err) {
          counts.failed++;
          ctx.log.error("orphan sweep: delete failed", { provider, id: instance.id, error: String(err) });
          ctx.metrics.count("kubefn_orphan_sweep_errors_total", { provider, stage: "delete" });
        }
      }
      return counts;
    },
  };
}
