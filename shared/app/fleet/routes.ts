import type { MiddlewareHandler } from "hono";
import { Hono } from "hono/tiny";
import { bearerToken, credentialOf, mayUseCluster, parseCrawlerCredentials } from "../../auth/index.ts";
import { assertNever } from "../../guards/index.ts";
import { type Context, DEFAULT_CLUSTER } from "../../runtime/index.ts";
import type { FleetPageAccess } from "../settings.ts";
import type { PassHistory } from "./pass-history.ts";
import { cachedFleet, type FleetSource, type FleetView, readFleet } from "./read.ts";
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

/** One cluster's part of the page: its read (cached), the passes its kubefn ran, its admission gate. */
export interface FleetGroup {
  /** The declared cluster's name (`default` for one cluster). */
  cluster: string;
  read: () => Promise<{ view: FleetView; fresh: boolean }>;
  passes: PassHistory;
  admission?: () => AdmissionView | undefined;
  /** Its kubefn's clock. */
  now: () => Date;
}

/**
 * One cluster's part of the page (see {@link fleetPage}): its primaries read with paged lists,
 * shared by every view within `cacheSeconds`, and the pass history of its kubefn.
 */
export function fleetGroup(
  ctx: Context,
  sources: readonly FleetSource[],
  passes: PassHistory,
  options: Pick<FleetPageOptions, "cacheSeconds" | "admission"> = {},
): FleetGroup {
  const read = cachedFleet(
    () => readFleet(ctx.kube, sources, () => ctx.clock.now()),
    (options.cacheSeconds ?? 5) * 1000,
    () => ctx.clock.now().getTime(),
  );
  return {
    cluster: ctx.cluster ?? DEFAULT_CLUSTER,
    read,
    passes,
    ...(options.admission ? { admission: options.admission } : {}),
    now: () => ctx.clock.now(),
  };
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
  return groupedFleetPage([fleetGroup(ctx, sources, passes, options)], options);
}

/**
 * The fleet page of several clusters (one deployment's `KUBEFN_CLUSTERS`): as {@link fleetPage},
 * with a section per cluster, in `groups`' order, headed by its name. Each cluster's read is its
 * own (listed from its API server, cached apart); a view needs a credential for every namespace
 * of every cluster shown.
 *
 * @example
 * const page = groupedFleetPage(members.map((m) => m.kubefn.page.group), options);
 */
export function groupedFleetPage(
  groups: readonly [FleetGroup, ...FleetGroup[]],
  options: Omit<FleetPageOptions, "admission"> = {},
): Hono {
  const cacheSeconds = options.cacheSeconds ?? 5;
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
  else if (options.apiToken)
    app.use(
      "/",
      fleetAuth(
        options.apiToken,
        groups.map((g) => g.cluster),
      ),
    );
  app.get("/", async (c) => {
    const views = await Promise.all(
      groups.map(async (g) => {
        const { view, fresh } = await g.read();
        const admission = g.admission?.();
        return {
          cluster: g.cluster,
          view,
          fresh,
          passes: g.passes.recent(),
          ...(admission ? { admission } : {}),
        };
      }),
    );
    const html = renderFleetPage({
      groups: views as [(typeof views)[number], ...typeof views],
      cacheSeconds,
      detailed: options.apiToken !== undefined,
      now: groups[0].now(),
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
 * Admits a credential of the API token setting for every namespace of every one of `clusters`,
 * presented as a bearer token or as HTTP Basic auth's password (any user name); 401 with a Basic
 * challenge otherwise, 403 for a credential scoped to some namespaces or other clusters.
 */
function fleetAuth(apiToken: string, clusters: readonly string[]): MiddlewareHandler {
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
    const refused = clusters.find((cluster) => !mayUseCluster(found, cluster));
    if (refused !== undefined) {
      return c.text(`the fleet page needs a credential for every cluster it shows (not ${refused})`, 403);
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
