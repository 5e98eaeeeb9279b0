import { type KubeObject, listAll, Resources } from "../../../kube/index.ts";
import type { SweepTask } from "../../../runtime/index.ts";
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
 * Caveats: the proxies the sweep listed may be older than the leases; a delete because of the
 * proxy is confirmed with a fresh GET of the proxy first. Leases without an ownerReference to a
 * Proxy are never touched.
 */
export function leaseSweepTask(): SweepTask {
  return {
    name: "proxy-leases",
    controller: proxyControllerName,
    async run(ctx, primaries) {
      const now = ctx.clock.now();
      const listed = new Map<string, ProxyState>();
      for (const p of parseProxies(primaries, ctx.log)) {
        if (p.metadata.uid) {
          listed.set(`${p.metadata.namespace}/${p.metadata.name}`, {
            uid: p.metadata.uid,
            ready: isProxyReady(p),
          });
        }
      }
      const leases = await listAll<ProxyLease & KubeObject>(ctx.kube, Resources.Lease, {
        labelSelector: proxyLeaseSelector,
      });
      const counts = { leases: leases.length, held: 0, deleted: 0, raced: 0 };
      for (const lease of leases) {
        const ref = proxyRefOf(lease);
        if (!ref || !isProxyLease(lease)) continue;
        let decision = leaseSweepDecision(lease, listed.get(`${lease.metadata.namespace}/${ref.name}`), now);
        if (decision.action === "delete" && decision.reason !== "ExpiredLongAgo") {
          decision = leaseSweepDecision(lease, proxyStateOf(await getLeasedProxy(ctx, lease)), now);
        }
        if (decision.action === "keep") {
          if (decision.held) counts.held++;
          continue;
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
      }
      ctx.metrics.gauge("kubefn_leases_held", counts.held);
      return counts;
    },
  };
}
