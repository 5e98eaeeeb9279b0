import type { Context as HonoContext } from "hono";
import { Hono } from "hono/tiny";
import { assertNever } from "../../../guards/index.ts";
import { isNamespaceName, isObjectName, parseLabelSelector } from "../../../kube/index.ts";
import { type Context, DEFAULT_CLUSTER } from "../../../runtime/index.ts";
import { readBodyCapped } from "../../../streams/index.ts";
import * as z from "../../../zod/index.ts";
import type { ProxyApiOptions } from "../discovery/index.ts";
import {
  apiErrorHandler,
  badNamespace,
  badRequest,
  bearerAuth,
  boundHolder,
  crawlerOf,
  forbiddenNamespace,
  mayUseNamespace,
} from "../discovery/index.ts";
import { maxLeaseSeconds, minLeaseSeconds } from "./lease.ts";
import { acquireLease, releaseLease, renewLease } from "./store.ts";

const holderSchema = z.string().check(z.minLength(1)).check(z.maxLength(253));
const ttlSchema = z.int().check(z.gte(minLeaseSeconds)).check(z.lte(maxLeaseSeconds));

const acquireBodySchema = z.object({
  namespace: z.optional(z.string().check(z.minLength(1)).check(z.maxLength(63))),
  selector: z.optional(z.string().check(z.maxLength(4096))),
  holder: holderSchema,
  ttlSeconds: ttlSchema,
});
const renewBodySchema = z.object({ holder: holderSchema, ttlSeconds: z.optional(ttlSchema) });
const releaseBodySchema = z.object({ holder: holderSchema });

/**
 * The lease API: a crawler's exclusive use of one Ready proxy for a TTL, stored as
 * coordination.k8s.io/v1 Leases (one per proxy, `proxy-<name>` in the proxy's namespace).
 *
 * - `POST /v1/leases` `{ namespace?, selector?, holder, ttlSeconds (5..3600) }` →
 *   201 `{ lease: { id, proxy: { namespace, name, ip, port, scheme }, holder, expiresAt } }`, or
 *   409 `{ error: "NoProxyAvailable" }` when every matching Ready proxy is held.
 * - `PUT /v1/leases/:namespace/:name` `{ holder, ttlSeconds? }` → 200 `{ lease }`; 409
 *   `{ error: "NotHolder" }`; 410 `{ error: "ProxyNotReady" }` (the lease is deleted); 404.
 * - `DELETE /v1/leases/:namespace/:name?holder=` (or body `{ holder }`) → 204; 409 NotHolder; 404.
 *
 * Holders are bound to the credential: the stored holder is `<crawler name>/<holder>`, so one
 * crawler cannot renew or release another's lease by asserting its holder string. Only Leases
 * kubefn made for proxies (labelled `crawl.kubefn.dev/managed-by=kubefn`, owned by a Proxy) are
 * ever read or written: any other Lease answers 404.
 *
 * 401 without the bearer token, 403 for a credential scoped to other clusters than this kubefn's
 * (`ctx.cluster`), 403 (acquire) or 404 (renew, release) for a namespace outside the credential's, 400 for a malformed body or selector, 503 (Retry-After) when the API server
 * cannot be reached.
 *
 * Caveats: "none free" is 409, not 503: the request conflicts with the current holders, the
 * service is healthy, and a 503 would trip generic retry and alerting on load balancers. Poll
 * again after a while, or widen the selector.
 *
 * @example
 * app.route("/", leaseRoutes(ctx, { apiToken: config.apiToken }));
 */
export function leaseRoutes(ctx: Context, options: ProxyApiOptions): Hono {
  const app = new Hono();
  app.onError(apiErrorHandler(ctx.log));
  const cluster = ctx.cluster ?? DEFAULT_CLUSTER;
  app.use("/v1/leases", bearerAuth(options.apiToken, cluster));
  app.use("/v1/leases/*", bearerAuth(options.apiToken, cluster));

  app.post("/v1/leases", async (c) => {
    const body = await readBody(c, acquireBodySchema);
    if (!body.ok) return refuseBody(c, body);
    if (body.data.namespace !== undefined && !isNamespaceName(body.data.namespace)) {
      return badNamespace(c, body.data.namespace);
    }
    const selector = parseLabelSelector(body.data.selector ?? "");
    if (!selector.ok) return badRequest(c, `selector: ${selector.error}`);
    const crawler = crawlerOf(c);
    if (body.data.namespace !== undefined && !mayUseNamespace(crawler, body.data.namespace)) {
      return forbiddenNamespace(c, body.data.namespace);
    }
    const result = await acquireLease(
      ctx,
      {
        namespace: body.data.namespace,
        scope: crawler.namespaces,
        selector: selector.requirements,
        holder: boundHolder(crawler, body.data.holder),
        ttlSeconds: body.data.ttlSeconds,
      },
      options.listing,
    );
    if (result.kind === "none") {
      return c.json(
        {
          error: "NoProxyAvailable",
          message:
            result.candidates === 0
              ? "no Ready proxy matches"
              : `all ${result.candidates} matching Ready proxies are leased`,
        },
        409,
      );
    }
    return c.json({ lease: result.lease }, 201);
  });

  app.put("/v1/leases/:namespace/:name", async (c) => {
    const body = await readBody(c, renewBodySchema);
    if (!body.ok) return refuseBody(c, body);
    const key = { namespace: c.req.param("namespace"), name: c.req.param("name") };
    if (!isNamespaceName(key.namespace)) return badNamespace(c, key.namespace);
    if (!isObjectName(key.name)) return badRequest(c, "the lease name is not an object name");
    const crawler = crawlerOf(c);
    if (!mayUseNamespace(crawler, key.namespace)) return c.json({ error: "LeaseNotFound" }, 404);
    const result = await renewLease(ctx, key, boundHolder(crawler, body.data.holder), body.data.ttlSeconds);
    switch (result.kind) {
      case "renewed":
        return c.json({ lease: result.lease }, 200);
      case "notFound":
        return c.json({ error: "LeaseNotFound" }, 404);
      case "notHolder":
        return c.json({ error: "NotHolder" }, 409);
      case "proxyNotReady":
        return c.json({ error: "ProxyNotReady" }, 410);
      default:
        return assertNever(result);
    }
  });

  app.delete("/v1/leases/:namespace/:name", async (c) => {
    const fromQuery = c.req.query("holder");
    const body =
      fromQuery !== undefined
        ? parseWith(releaseBodySchema, { holder: fromQuery })
        : await readBody(c, releaseBodySchema);
    if (!body.ok) return refuseBody(c, body);
    const key = { namespace: c.req.param("namespace"), name: c.req.param("name") };
    if (!isNamespaceName(key.namespace)) return badNamespace(c, key.namespace);
    if (!isObjectName(key.name)) return badRequest(c, "the lease name is not an object name");
    const crawler = crawlerOf(c);
    if (!mayUseNamespace(crawler, key.namespace)) return c.json({ error: "LeaseNotFound" }, 404);
    const result = await releaseLease(ctx, key, boundHolder(crawler, body.data.holder));
    switch (result.kind) {
      case "released":
        return c.body(null, 204);
      case "notFound":
        return c.json({ error: "LeaseNotFound" }, 404);
      case "notHolder":
        return c.json({ error: "NotHolder" }, 409);
      default:
        return assertNever(result);
    }
  });

  return app;
}

type BodyResult<T> = { ok: true; data: T } | { ok: false; error: string; status?: 408 | 413 };

/** Lease bodies are a few fields; anything longer is refused before it is read whole. */
const maxBodyBytes = 64 * 1024;
const bodyTimeoutMs = 10_000;

/**
 * The JSON body parsed with `schema`; a missing, malformed or invalid body is an error message.
 * Read as a stream, cut off at {@link maxBodyBytes} (413) or {@link bodyTimeoutMs} (408), so a
 * leaked crawler token cannot make the host buffer a body of any size or hold it open.
 */
async function readBody<T>(c: HonoContext, schema: z.ZodMiniType<T>): Promise<BodyResult<T>> {
  const read = await readBodyCapped(c.req.raw, maxBodyBytes, bodyTimeoutMs);
  if (!read.ok && read.reason === "BodyTimeout") {
    return { ok: false, status: 408, error: "the body did not arrive in time" };
  }
  if (!read.ok) return { ok: false, status: 413, error: `the body is larger than ${maxBodyBytes} bytes` };
  let raw: unknown;
  try {
    raw = JSON.parse(read.text);
  } catch {
    return { ok: false, error: "the body must be a JSON object" };
  }
  return parseWith(schema, raw);
}

function refuseBody(c: HonoContext, body: { error: string; status?: 408 | 413 }): Response {
  if (body.status === 413) return c.json({ error: "PayloadTooLarge", message: body.error }, 413);
  if (body.status === 408) return c.json({ error: "RequestTimeout", message: body.error }, 408);
  return badRequest(c, body.error);
}

function parseWith<T>(schema: z.ZodMiniType<T>, raw: unknown): BodyResult<T> {
  const parsed = schema.safeParse(raw);
  return parsed.success
    ? { ok: true, data: parsed.data }
    : { ok: false, error: z.prettifyError(parsed.error) };
}
