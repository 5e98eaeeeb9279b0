import type { Context as HonoContext } from "hono";
import { Hono } from "hono/tiny";
import { bearerAuth, crawlerOf, mayUseNamespace } from "../../../auth/index.ts";
import { isNamespaceName, parseLabelSelector } from "../../../kube/index.ts";
import { type Context, DEFAULT_CLUSTER } from "../../../runtime/index.ts";
import { apiErrorHandler } from "./api-errors.ts";
import { freshProxyListing, type ProxyListing } from "./listing.ts";
import { selectReady } from "./ready.ts";

export interface ProxyApiOptions {
  /**
   * The crawler credentials (see `parseCrawlerCredentials`): one plain token for every namespace,
   * or a JSON array of `{ name, token, namespaces }`. Crawlers send `Authorization: Bearer <token>`.
   * Must not be empty.
   */
  apiToken: string;
  /**
   * Where listings come from: one read shared by every request of the instance for a few seconds
   * (`sharedProxyListing`, what the platforms wire), or a fresh list per request when unset.
   */
  listing?: ProxyListing;
}

/**
 * The discovery API for crawlers: `GET /v1/proxies?namespace=&labelSelector=` answers
 * `{ items: [{ cluster, namespace, name, ip, port, scheme, latencyMillis, labels }] }` — the Ready
 * proxies of this kubefn's cluster (`ctx.cluster`) matching the filter, fastest first (see
 * `selectReady`), only in the namespaces the crawler's credential names. 401 without the bearer
 * token, 403 for a namespace or a cluster outside the credential's, 400 for a malformed
 * labelSelector, 503 when the API server cannot be reached.
 *
 * Caveats: the list is a read, not a reservation; crawlers wanting a proxy to themselves take a
 * lease (`leaseRoutes`).
 *
 * @example
 * app.route("/", discoveryRoutes(ctx, { apiToken: config.apiToken }));
 */
export function discoveryRoutes(ctx: Context, options: ProxyApiOptions): Hono {
  const app = new Hono();
  app.onError(apiErrorHandler(ctx.log));
  const listing = options.listing ?? freshProxyListing(ctx);
  const cluster = ctx.cluster ?? DEFAULT_CLUSTER;
  app.use("/v1/proxies", bearerAuth(options.apiToken, cluster));
  app.get("/v1/proxies", async (c) => {
    const namespace = c.req.query("namespace") || undefined;
    if (namespace !== undefined && !isNamespaceName(namespace)) return badNamespace(c, namespace);
    const crawler = crawlerOf(c);
    if (namespace !== undefined && !mayUseNamespace(crawler, namespace)) {
      return forbiddenNamespace(c, namespace);
    }
    const selector = parseLabelSelector(c.req.query("labelSelector") ?? "");
    if (!selector.ok) return badRequest(c, `labelSelector: ${selector.error}`);
    const proxies = await listing.inScope(namespace, crawler.namespaces);
    const items = selectReady(proxies, { namespace, selector: selector.requirements }).map(
      ({ namespace, name, ip, port, scheme, latencyMillis, labels }) => ({
        cluster,
        namespace,
        name,
        ip,
        port,
        scheme,
        latencyMillis,
        labels,
      }),
    );
    return c.json({ items });
  });
  return app;
}

/** 400 `{ error: "BadRequest", message }`. */
export function badRequest(c: HonoContext, message: string): Response {
  return c.json({ error: "BadRequest", message }, 400);
}

/** 400 for a namespace no object can be in (it would otherwise become part of an API path). */
export function badNamespace(c: HonoContext, namespace: string): Response {
  return badRequest(
    c,
    `namespace ${JSON.stringify(namespace.slice(0, 80))} is not a DNS label (lower-case alphanumerics and '-', at most 63)`,
  );
}

/** 403 for a namespace outside the credential's. */
export function forbiddenNamespace(c: HonoContext, namespace: string): Response {
  return c.json({ error: "Forbidden", message: `this credential may not use namespace ${namespace}` }, 403);
}
