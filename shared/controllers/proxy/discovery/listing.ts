import type { Context } from "../../../runtime/index.ts";
import type { Proxy as ProxyObject } from "../api.ts";
import { listProxies, listProxiesInScope } from "./list-proxies.ts";

/** How the crawler API reads the Proxies a request may see. */
export interface ProxyListing {
  /** The Proxies in `namespace` (when given, already checked to be in scope), else in `scope`. */
  inScope(namespace: string | undefined, scope: readonly string[] | "*"): Promise<ProxyObject[]>;
}

/** A fresh read per request: one list per request (per namespace of a scoped credential). */
export function freshProxyListing(ctx: Pick<Context, "kube" | "log" | "metrics" | "seal">): ProxyListing {
  return { inScope: (namespace, scope) => listProxiesInScope(ctx, namespace, scope) };
}

/** How long one read serves the crawler API, by default. */
export const defaultListingSeconds = 5;

/**
 * One cluster-wide list of Proxies (paged, from the API server's watch cache) shared by every
 * crawler request of this instance for `ttlSeconds`, and by requests arriving while it runs — as
 * the fleet page's `cachedFleet` does. A burst of crawlers costs one list per period, whatever
 * their number and scopes; each request filters it to its namespaces in memory.
 *
 * Caveats: a listing is up to `ttlSeconds` old. It only chooses: a lease is still taken by a
 * create or a resourceVersion-guarded update of its Lease, and a renewal reads its Proxy afresh,
 * so two crawlers never hold one proxy, and a proxy that stopped being Ready is offered for at most
 * that long. A failed read is not kept: the next request reads again. The cache lives in the
 * closure of one instance (build it once, where the routes are built), never in module scope.
 *
 * @example
 * const listing = sharedProxyListing(ctx);
 * app.route("/", discoveryRoutes(ctx, { apiToken, listing }));
 * app.route("/", leaseRoutes(ctx, { apiToken, listing }));
 */
export function sharedProxyListing(
  ctx: Pick<Context, "kube" | "log" | "clock" | "metrics" | "seal">,
  ttlSeconds = defaultListingSeconds,
): ProxyListing {
  let last: { startedAt: number; proxies: Promise<ProxyObject[]> } | undefined;
  const all = (): Promise<ProxyObject[]> => {
    const t = ctx.clock.now().getTime();
    if (last && t - last.startedAt < ttlSeconds * 1000 && t >= last.startedAt) return last.proxies;
    const current = { startedAt: t, proxies: listProxies(ctx) };
    last = current;
    current.proxies.catch(() => {
      if (last === current) last = undefined;
    });
    return current.proxies;
  };
  return {
    async inScope(namespace, scope) {
      const proxies = await all();
      return proxies.filter((p) => {
        const ns = p.metadata.namespace ?? "";
        return namespace !== undefined ? ns === namespace : scope === "*" || scope.includes(ns);
      });
    },
  };
}
