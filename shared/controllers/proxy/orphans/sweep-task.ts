import type { KubeObject } from "../../../kube/index.ts";
import { SWEEP_PAGE_SIZE, type SweepTask } from "../../../runtime/index.ts";
import { proxyResource } from "../api.ts";
import { proxyControllerName } from "../controller.ts";
import { notOptedIn, type ProviderListing, providerInstances } from "../drift.ts";
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
 * Lists every provider by `crawl.kubefn.dev/managed-by=kubefn` once (memoised with the drift
 * decision's list), then narrows the candidates page by page with {@link findOrphans} against the
 * swept Proxies, confirms what is left against a fresh paged list of Proxies, and deletes it.
 * Counts `kubefn_orphans_collected_total{provider}`.
 *
 * Memory: the instances kubefn made (bounded by instances, not by Proxies — External Proxies have
 * none) and one page of Proxies at a time.
 *
 * Where kubefn-tenant is bound per namespace, a namespaced provider is listed per namespace of a
 * swept Proxy naming it instead (orphans in a namespace without such a Proxy wait for a
 * cluster-wide binding).
 *
 * Runs once per drift period (`withDrift`), not every sweep.
 *
 * Caveats: a provider whose list or delete fails is logged and counted (`failed`) and the others
 * proceed; its orphans wait for the next sweep. Instances without the owner tag are never touched.
 */
export function orphanSweepTask(opts: OrphanSweepOptions): SweepTask {
  const graceSeconds = opts.graceSeconds ?? defaultOrphanGraceSeconds;
  return {
    name: "proxy-orphans",
    controller: proxyControllerName,
    // Orphans wait out a 600 s grace anyway: once per drift period is soon enough, and then the
    // instance lists are the drift decision's own (no list of its own every sweep).
    withDrift: true,
    start(ctx, memo) {
      const now = ctx.clock.now();
      const counts = { instances: 0, orphans: 0, collected: 0, failed: 0 };
      let candidates: Promise<Map<string, AgedInstance[]>> | undefined;
      // Providers listed per namespace (kubefn-tenant bound per namespace): each namespace of a
      // swept Proxy is listed once, when its first Proxy's page comes.
      const perNamespace = new Map<string, Extract<ProviderListing, { scope: "namespaces" }>>();
      const namespacesListed = new Set<string>();
      const listed = () => {
        candidates ??= (async () => {
          const byProvider = new Map<string, AgedInstance[]>();
          for (const [name, provider] of Object.entries(opts.providers).sort(([a], [b]) =>
            a < b ? -1 : 1,
          )) {
            try {
              const listing = await providerInstances(memo, name, provider);
              if (listing.scope === "namespaces") {
                perNamespace.set(name, listing);
                byProvider.set(name, []);
                continue;
              }
              counts.instances += listing.instances.length;
              byProvider.set(name, findOrphans(listing.instances, [], now, graceSeconds));
            } catch (err) {
              counts.failed++;
              ctx.log.error("orphan sweep: listing instances failed", { provider: name, error: String(err) });
              ctx.metrics.count("kubefn_orphan_sweep_errors_total", { provider: name, stage: "list" });
            }
          }
          return byProvider;
        })();
        return candidates;
      };
      const addNamespacesOf = async (
        byProvider: Map<string, AgedInstance[]>,
        proxies: readonly KubeObject[],
      ) => {
        for (const [name, listing] of perNamespace) {
          for (const namespace of namespacesUsing(name, proxies)) {
            if (namespacesListed.has(`${name}/${namespace}`)) continue;
            namespacesListed.add(`${name}/${namespace}`);
            try {
              const instances = await listing.in(namespace);
              if (instances === notOptedIn) continue;
              counts.instances += instances.length;
              byProvider.get(name)?.push(...findOrphans(instances, [], now, graceSeconds));
            } catch (err) {
              counts.failed++;
              ctx.log.error("orphan sweep: listing instances failed", {
                provider: name,
                namespace,
                error: String(err),
              });
              ctx.metrics.count("kubefn_orphan_sweep_errors_total", { provider: name, stage: "list" });
            }
          }
        }
      };
      const narrow = (byProvider: Map<string, AgedInstance[]>, proxies: readonly KubeObject[]) => {
        for (const [name, left] of byProvider) {
          if (left.length > 0) byProvider.set(name, findOrphans(left, proxies, now, graceSeconds));
        }
      };
      const remaining = (byProvider: Map<string, AgedInstance[]>) =>
        [...byProvider.values()].reduce((n, left) => n + left.length, 0);
      return {
        async page(proxies) {
          const byProvider = await listed();
          await addNamespacesOf(byProvider, proxies);
          narrow(byProvider, proxies);
        },
        async finish() {
          const byProvider = await listed();
          if (remaining(byProvider) === 0) return counts;
          // A Proxy created after the sweep listed it may already own an instance: check again,
          // against a consistent read (not the watch cache), page by page.
          let token: string | undefined;
          do {
            const page = await ctx.kube.list(proxyResource, {
              limit: SWEEP_PAGE_SIZE,
              ...(token ? { continue: token } : {}),
            });
            narrow(byProvider, page.items);
            if (remaining(byProvider) === 0) return counts;
            token = page.continue;
          } while (token);
          for (const [provider, orphans] of byProvider) {
            for (const instance of orphans) {
              counts.orphans++;
              try {
                await opts.providers[provider]?.delete(instance.id, {
                  owner: instance.tags[ownerTagKey] ?? "",
                  uid: instance.uid,
                });
                counts.collected++;
                ctx.metrics.count("kubefn_orphans_collected_total", { provider });
                ctx.log.info("collected orphaned instance", {
                  provider,
                  id: instance.id,
                  tags: instance.tags,
                });
              } catch (err) {
                counts.failed++;
                ctx.log.error("orphan sweep: delete failed", {
                  provider,
                  id: instance.id,
                  error: String(err),
                });
                ctx.metrics.count("kubefn_orphan_sweep_errors_total", { provider, stage: "delete" });
              }
            }
          }
          return counts;
        },
      };
    },
  };
}

/**
 * The namespaces of the Proxies that name `provider` (External ones name none): where its
 * instances, and so its orphans, are.
 */
function namespacesUsing(provider: string, proxies: readonly KubeObject[]): Set<string> {
  const out = new Set<string>();
  for (const p of proxies) {
    const spec = p.spec as { provider?: unknown } | undefined;
    if (spec?.provider === provider) out.add(p.metadata.namespace ?? "");
  }
  return out;
}
