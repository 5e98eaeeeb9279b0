import { type KubeObject, Resources } from "../../../kube/index.ts";
import { pagesOf, SWEEP_PAGE_SIZE, type SweepTask } from "../../../runtime/index.ts";
import { proxyControllerName } from "../controller.ts";
import { isProxyReady, parseProxies } from "../discovery/index.ts";
import {
  isProxyLease,
  leaseSweepDecision,
  type ProxyLease,
  type ProxyState,
  proxyLeaseSelector,
  proxyRefOf,
} from "./lease.ts";
import { deleteGuarded, getLeasedProxy, proxyStateOf } from "./store.ts";

/**
 * Sweep task cleaning up proxy Leases (those labelled `crawl.kubefn.dev/proxy`) by
 * `leaseSweepDecision`: a lease whose proxy is gone, replaced or not Ready ends; one expired for
 * longer than its duration is removed. Deletes are resourceVersion-guarded, so a lease renewed or
 * taken over meanwhile survives. Sets the gauge `kubefn_leases_held` (unexpired, held leases) and
 * counts `kubefn_leases_deleted_total{reason}`.
 *
 * The leases are listed (paged) when the first page of Proxies arrives and held, by the proxy
 * they name, until that proxy's page comes; the leases whose proxy no page held are judged at the
 * end. Memory: the proxy Leases (bounded by the leases crawlers hold, not by Proxies) and one page.
 *
 * Caveats: the proxies the sweep listed may be older than the leases; a delete because of the
 * proxy is confirmed with a fresh GET of the proxy first. Leases without an ownerReference to a
 * Proxy are never touched.
 */
export function leaseSweepTask(): SweepTask {
  return {
    name: "proxy-leases",
    controller: proxyControllerName,
    start(ctx) {
      const now = ctx.clock.now();
      const counts = { leases: 0, held: 0, deleted: 0, raced: 0 };
      let waiting: Promise<Map<string, ProxyLease[]>> | undefined;
      const leasesByProxy = () => {
        waiting ??= (async () => {
          const byProxy = new Map<string, ProxyLease[]>();
          for await (const page of pagesOf(ctx.kube, Resources.Lease, {
            labelSelector: proxyLeaseSelector,
            limit: SWEEP_PAGE_SIZE,
          })) {
            counts.leases += page.length;
            for (const lease of page as (ProxyLease & KubeObject)[]) {
              const ref = proxyRefOf(lease);
              if (!ref || !isProxyLease(lease)) continue;
              const key = `${lease.metadata.namespace}/${ref.name}`;
              byProxy.set(key, [...(byProxy.get(key) ?? []), lease]);
            }
          }
          return byProxy;
        })();
        return waiting;
      };
      const judge = async (lease: ProxyLease, listed: ProxyState | undefined) => {
        let decision = leaseSweepDecision(lease, listed, now);
        if (decision.action === "delete" && decision.reason !== "ExpiredLongAgo") {
          decision = leaseSweepDecision(lease, proxyStateOf(await getLeasedProxy(ctx, lease)), now);
        }
        if (decision.action === "keep") {
          if (decision.held) counts.held++;
          return;
        }
        if (await deleteGuarded(ctx, lease)) {
          counts.deleted++;
          ctx.metrics.count("kubefn_leases_deleted_total", { reason: decision.reason });
          ctx.log.info("deleted proxy lease", {
            namespace: lease.metadata.namespace,
            name: lease.metadata.name,
            reason: decision.reason,
          });
        } else counts.raced++;
      };
      return {
        async page(primaries) {
          const byProxy = await leasesByProxy();
          if (byProxy.size === 0) return;
          for (const p of parseProxies(primaries, ctx.log)) {
            const key = `${p.metadata.namespace}/${p.metadata.name}`;
            const leases = byProxy.get(key);
            if (!leases || !p.metadata.uid) continue;
            byProxy.delete(key);
            for (const lease of leases) await judge(lease, { uid: p.metadata.uid, ready: isProxyReady(p) });
          }
        },
        async finish() {
          for (const leases of (await leasesByProxy()).values()) {
            for (const lease of leases) await judge(lease, undefined);
          }
          ctx.metrics.gauge("kubefn_leases_held", counts.held);
          return counts;
        },
      };
    },
  };
}
