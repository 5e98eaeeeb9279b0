import type { MiddlewareHandler } from "hono";
import { Hono } from "hono/tiny";
import { bearerToken, credentialOf, parseCrawlerCredentials } from "../../auth/index.ts";
import { assertNever } from "../../guards/index.ts";
import type { Context } from "../../runtime/index.ts";
import type { FleetPageAccess } from "../settings.ts";
import type { PassHistory } from "./pass-history.ts";
import { cachedFleet, type FleetSource, readFleet } from "./read.ts";
import { type AdmissionView, fleetCss, renderFleetPage } from "./render.ts";

export interface FleetPageOptions {
  /**
   * Who may see the page (the `FLEET_PAGE` setting): `token` (the default) serves it only with
   * `apiToken` set, `open` also without it (then with no messages), `off` never; closed, `GET /`
   * answers 404 saying which setting opens it.
   */
  access?: FleetPageAccess;
  /**
   * The API token setting (see `parseCrawlerCredentials`). When set, the page needs a credential
   * for every namespace (`"*"`), as `Authorization: Bearer <token>` or as the password of HTTP
   * Basic auth (what a browser prompts for); when unset, the page is served only where `access`
   * is `open`, and shows no messages.
   */
  apiToken?: string;
  /** Views within this many seconds share one read of the cluster; default 5. */
  cacheSeconds?: number;
  /** The admission gate's last check (undefined before the first): shown when kubefn does not reconcile. */
  admission?: () => AdmissionView | undefined;
}

/**
 * `GET /`: the fleet page (see `renderFleetPage`), and `GET /robots.txt` asking crawlers to stay
 * away. A view reads each primary kind with paged lists from the API server's watch cache, shared
 * by every view within `cacheSeconds`; the pass history is this instance's.
 *
 * Every answer carries a Content-Security-Policy that allows the page's one stylesheet by hash and
 * nothing else (no script, no images, no frames, no forms), `nosniff`, `no-referrer`, `no-store`
 * and `X-Robots-Tag: noindex`.
 *
 * Caveats: a crawler credential scoped to some namespaces gets 403 — the page shows every
 * namespace and the cluster-scoped kinds.
 *
 * @example
 * const sources = registry.controllers.map((c) => ({ controller: c.name, resource: c.for }));
 * app.route("/", fleetPage(ctx, sources, passes, { apiToken: settings.apiToken }));
 */
export function fleetPage(
  ctx: Context,
  sources: readonly FleetSource[],
  passes: PassHistory,
  options: FleetPageOptions = {},
): Hono {
  const cacheSeconds = options.cacheSeconds ?? 5;
  const fleet = cachedFleet(
    () => readFleet(ctx.kube, sources, () => ctx.clock.now()),
    cacheSeconds * 1000,
    () => ctx.clock.now().getTime(),
  );
  let policy: Promise<string> | undefined;
  const app = new Hono();
  app.use("/", async (c, next) => {
    policy ??= contentSecurityPolicy();
    await next();
    c.res.headers.set("content-security-policy", await policy);
    for (const [name, value] of Object.entries(pageHeaders)) c.res.headers.set(name, value);
  });
  const closed = closedBecause(options.access ?? "token", options.apiToken);
  if (closed) app.get("/", (c) => c.text(closed, 404));
  else if (options.apiToken) app.use("/", fleetAuth(options.apiToken));
  app.get("/", async (c) => {
    const { view, fresh } = await fleet();
    const admission = options.admission?.();
    const html = renderFleetPage({
      view,
      fresh,
      cacheSeconds,
      passes: passes.recent(),
      detailed: options.apiToken !== undefined,
      now: ctx.clock.now(),
      ...(admission ? { admission } : {}),
    });
    return c.html(html);
  });
  app.get("/robots.txt", (c) => c.text("User-agent: *\nDisallow: /\n"));
  return app;
}

/** Why the page is not served (the answer's text), or undefined when it is. */
function closedBecause(access: FleetPageAccess, apiToken: string | undefined): string | undefined {
  switch (access) {
    case "off":
      return "the fleet page is off (FLEET_PAGE=off)\n";
    case "token":
      return apiToken
        ? undefined
        : "the fleet page is closed: it is served only behind API_TOKEN here (set API_TOKEN and present it, or FLEET_PAGE=open to serve it to anyone without condition messages)\n";
    case "open":
      return undefined;
    default:
      return assertNever(access);
  }
}

const pageHeaders = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "x-robots-tag": "noindex, nofollow, noarchive",
};

async function contentSecurityPolicy(): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(fleetCss));
  const hash = btoa(String.fromCharCode(...new Uint8Array(digest)));
  return `default-src 'none'; style-src 'sha256-${hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

/**
 * Admits a credential of the API token setting for every namespace, presented as a bearer token
 * or as HTTP Basic auth's password (any user name); 401 with a Basic challenge otherwise, 403 for a
 * credential scoped to some namespaces.
 */
function fleetAuth(apiToken: string): MiddlewareHandler {
  const credentials = parseCrawlerCredentials(apiToken);
  return async (c, next) => {
    const header = c.req.header("authorization");
    const found = await credentialOf(credentials, bearerToken(header) ?? basicPassword(header), {
      acceptSecret: true,
    });
    if (!found) {
      c.header("WWW-Authenticate", 'Basic realm="kubefn", charset="UTF-8"');
      return c.text("the fleet page needs the API token (as a bearer token or a Basic auth password)", 401);
    }
    if (found.namespaces !== "*") {
      return c.text("the fleet page needs a credential for every namespace", 403);
    }
    await next();
  };
}

function basicPassword(header: string | undefined): string | undefined {
  const encoded = /^Basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(header ?? "")?.[1];
  if (!encoded) return undefined;
  let decoded: string;
  try {
    decoded = atob(encoded);
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}
