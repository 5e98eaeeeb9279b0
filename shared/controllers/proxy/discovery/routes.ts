import { Hono } from "hono/tiny";
import type { Context } from "../../../runtime/types.ts";
import { apiErrorHandler } from "./api-errors.ts";
import { bearerAuth } from "./bearer-auth.ts";
import { parseLabelSelector } from "./label-selector.ts";
import { listProxies } from "./list-proxies.ts";
import { selectReady } from "./ready.ts";

export interface ProxyApiOptions {
  /** Crawlers send it as `Authorization: Bearer <apiToken>`. Must not be empty. */
  apiToken: string;
}

/**
 * The discovery API for crawlers: `GET /v1/proxies?namespace=&labelSelector=` answers
 * `{ items: [{ namespace, name, ip, port, scheme, latencyMillis, labels }] }` — the Ready proxies
 * matching the filter, fastest first (see `selectReady`). 401 without the bearer token, 400 for a
 * malformed labelSelector, 503 when the API server cannot be reached.
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
  app.use("/v1/proxies", bearerAuth(options.apiToken));
  app.get("/v1/proxies", async (c) => {
    const namespace = c.req.query("namespace") || undefined;
    const selector = parseLabelSelector(c.req.query("labelSelector") ?? "");
    if (!selector.ok)
      return c.json({ error: "BadRequest", message: `labelSelector: ${selector.error}` }, 400);
    const proxies = await listProxies(ctx.kube, ctx.log, namespace);
    const items = selectReady(proxies, { namespace, selector: selector.requirements }).map(
      ({ namespace, name, ip, port, scheme, latencyMillis, labels }) => ({
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
