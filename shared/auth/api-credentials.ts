/**
 * The API credentials (the `API_TOKEN` setting): one secret from which each namespace's token is
 * derived, or a list of named credentials scoped to namespaces. An operator's HTTP API (the
 * crawler API) and the fleet page take them alike.
 */
import type { Context as HonoContext, MiddlewareHandler } from "hono";
import * as z from "../zod/index.ts";
import { hmacSha256 } from "./hmac.ts";
import { bearerToken } from "./relay-signature.ts";
import { tokensEqual } from "./tokens.ts";

/**
 * One crawler's credential: its name (which prefixes every lease holder it asserts, so one crawler
 * can neither renew nor release another's lease), the namespaces whose proxies it may see and
 * lease (`"*"`: every namespace) and the clusters (`KUBEFN_CLUSTERS` names; every cluster when
 * unset or `"*"`).
 *
 * `secret`: the plain API token itself. It is not a crawler credential: crawlers present a token
 * derived from it for one namespace ({@link namespaceToken}); only the fleet page takes it as it is.
 */
export interface CrawlerCredential {
  name: string;
  token: string;
  namespaces: readonly string[] | "*";
  clusters?: readonly string[] | "*";
  secret?: true;
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

const credentialSchema = z.object({
  name: z.string().check(z.regex(/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/, "a DNS label")),
  token: z.string().check(z.minLength(16, "at least 16 characters")),
  namespaces: z.union([
    z.literal("*"),
    z.array(z.string().check(z.minLength(1)).check(z.maxLength(63))).check(z.minLength(1)),
  ]),
  clusters: z.optional(
    z.union([
      z.literal("*"),
      z.array(z.string().check(z.regex(dnsLabel, "a cluster name (a DNS label)"))).check(z.minLength(1)),
    ]),
  ),
});

/**
 * The crawler credentials in the API token setting: either a JSON array of
 * `{ name, token, namespaces: [...] | "*", clusters?: [...] | "*" }` — where `"*"` is the explicit
 * choice of a cluster-wide crawler, and `clusters` narrows a fleet's credential to some of its
 * clusters — or one plain token, the API secret: crawlers then present the token of their
 * namespace ({@link namespaceToken}), which sees and leases that namespace's proxies only (in one
 * cluster's, when minted for it).
 *
 * @throws Error naming what is wrong: a bad setting must stop the start, never open the API.
 * @example
 * parseCrawlerCredentials('[{"name":"team-a","token":"…","namespaces":["crawl-a"]}]')
 */
export function parseCrawlerCredentials(setting: string): CrawlerCredential[] {
  const text = setting.trim();
  if (text === "") throw new Error("the crawler API token setting is empty");
  if (!text.startsWith("[")) return [{ name: "operator", token: text, namespaces: "*", secret: true }];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error("the crawler API token setting starts with [ but is not JSON");
  }
  const parsed = z.array(credentialSchema).check(z.minLength(1)).safeParse(raw);
  if (!parsed.success) throw new Error(`crawler credentials: ${z.prettifyError(parsed.error)}`);
  const names = new Set(parsed.data.map((c) => c.name));
  if (names.size !== parsed.data.length) throw new Error("crawler credentials: names must be unique");
  return parsed.data;
}

/** Prefix and version of a namespace token: `kfns1.<namespace>.<mac>`. */
const namespaceTokenPrefix = "kfns1";
/** Prefix and version of a cluster's namespace token: `kfnc1.<cluster>.<namespace>.<mac>`. */
const clusterTokenPrefix = "kfnc1";

/**
 * The crawler token of `namespace` under the API secret (the plain `API_TOKEN`):
 * `kfns1.<namespace>.<base64url HMAC-SHA256(secret, "kubefn crawler namespace\n" + namespace)>`.
 * Whoever holds it sees and leases that namespace's Ready proxies and no other's; the operator
 * mints one per tenant (`node --import tsx scripts/crawler-token.ts <namespace>`). Rotating the
 * secret revokes every namespace token at once.
 *
 * @example
 * await namespaceToken(apiToken, "crawl-a") // "kfns1.crawl-a.Q2F…"
 */
export async function namespaceToken(secret: string, namespace: string): Promise<string> {
  return `${namespaceTokenPrefix}.${namespace}.${await macOf(secret, `kubefn crawler namespace\n${namespace}`)}`;
}

/**
 * The crawler token of `namespace` in one cluster of a fleet under the API secret:
 * `kfnc1.<cluster>.<namespace>.<base64url HMAC-SHA256(secret, "kubefn crawler cluster namespace\n"
 * + cluster + "\n" + namespace)>`. It sees and leases that namespace's Ready proxies in `cluster`
 * alone: presented to another cluster's API (`?cluster=`), it is refused (403).
 *
 * @example
 * await clusterNamespaceToken(apiToken, "east", "crawl-a") // "kfnc1.east.crawl-a.x9…"
 */
export async function clusterNamespaceToken(
  secret: string,
  cluster: string,
  namespace: string,
): Promise<string> {
  const mac = await macOf(secret, `kubefn crawler cluster namespace\n${cluster}\n${namespace}`);
  return `${clusterTokenPrefix}.${cluster}.${namespace}.${mac}`;
}

async function macOf(secret: string, text: string): Promise<string> {
  const mac = await hmacSha256(secret, text);
  return btoa(String.fromCharCode(...mac))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

/** Whether `credential` may use proxies in `namespace`. */
export function mayUseNamespace(credential: CrawlerCredential, namespace: string): boolean {
  return credential.namespaces === "*" || credential.namespaces.includes(namespace);
}

/** Whether `credential` may use the proxies of `cluster` (a declared cluster's name). */
export function mayUseCluster(credential: CrawlerCredential, cluster: string): boolean {
  return (
    credential.clusters === undefined || credential.clusters === "*" || credential.clusters.includes(cluster)
  );
}

/** The holder identity stored in a Lease: the crawler's name and the holder it asserted. */
export function boundHolder(credential: CrawlerCredential, holder: string): string {
  return `${credential.name}/${holder}`;
}

/**
 * The credential whose token is `presented`, if any: one of the listed credentials, or a
 * namespace token derived from the API secret ({@link namespaceToken}), which is the crawler
 * `ns.<namespace>` for that namespace alone. The API secret itself is admitted only with
 * `acceptSecret` (the fleet page, the operator's). Every credential is compared (constant time
 * each), so the answer's timing does not tell which one nearly matched.
 */
export async function credentialOf(
  credentials: readonly CrawlerCredential[],
  presented: string | undefined,
  options: { acceptSecret?: boolean } = {},
): Promise<CrawlerCredential | undefined> {
  let found: CrawlerCredential | undefined;
  if (!presented) return undefined;
  const namespace = namespaceOfToken(presented);
  const scoped = clusterNamespaceOfToken(presented);
  for (const credential of credentials) {
    if (credential.secret && namespace !== undefined) {
      const expected = await namespaceToken(credential.token, namespace);
      if ((await tokensEqual(presented, expected)) && !found) {
        found = { name: `ns.${namespace}`, token: presented, namespaces: [namespace] };
      }
      continue;
    }
    if (credential.secret && scoped !== undefined) {
      const expected = await clusterNamespaceToken(credential.token, scoped.cluster, scoped.namespace);
      if ((await tokensEqual(presented, expected)) && !found) {
        found = {
          name: `ns.${scoped.namespace}`,
          token: presented,
          namespaces: [scoped.namespace],
          clusters: [scoped.cluster],
        };
      }
      continue;
    }
    if (credential.secret && !options.acceptSecret) continue;
    if ((await tokensEqual(presented, credential.token)) && !found) found = credential;
  }
  return found;
}

/** The namespace a `kfns1.<namespace>.<mac>` token names, if it has that shape. */
function namespaceOfToken(presented: string): string | undefined {
  const match = /^kfns1\.([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\.[A-Za-z0-9_-]{43}$/.exec(presented);
  return match?.[1];
}

/** The cluster and namespace a `kfnc1.<cluster>.<namespace>.<mac>` token names, if it has that shape. */
function clusterNamespaceOfToken(presented: string): { cluster: string; namespace: string } | undefined {
  const label = "([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)";
  const match = new RegExp(`^kfnc1\\.${label}\\.${label}\\.[A-Za-z0-9_-]{43}$`).exec(presented);
  return match ? { cluster: match[1]!, namespace: match[2]! } : undefined;
}

const crawlerKey = "kubefnCrawler";

/** The credential {@link bearerAuth} admitted the request with. */
export function crawlerOf(c: HonoContext): CrawlerCredential {
  const credential = c.get(crawlerKey as never) as CrawlerCredential | undefined;
  if (!credential) throw new Error("crawlerOf: the route is not behind bearerAuth");
  return credential;
}

/**
 * Hono middleware admitting requests with `Authorization: Bearer <token>` of one of the crawler
 * credentials in `apiToken` (see {@link parseCrawlerCredentials}), or a namespace token derived
 * from it ({@link namespaceToken}, {@link clusterNamespaceToken}); anything else — the API secret
 * itself too — gets 401 `{ error: "Unauthorized" }` with `WWW-Authenticate: Bearer`, and a
 * credential scoped to other clusters than `cluster` (the one this API's kubefn reconciles) gets
 * 403, before any read. The credential is available to the route through {@link crawlerOf}.
 * Shared by the discovery and lease routes.
 *
 * Caveats: throws at construction for an empty or malformed setting, so a missing secret fails the
 * host's start rather than opening the API. Every credential is compared (constant time each), so
 * the answer's timing does not tell which one nearly matched.
 *
 * @example
 * app.use("/v1/*", bearerAuth(config.apiToken, "default"));
 */
export function bearerAuth(apiToken: string, cluster: string): MiddlewareHandler {
  const credentials = parseCrawlerCredentials(apiToken);
  return async (c, next) => {
    const found = await credentialOf(credentials, bearerToken(c.req.header("authorization")));
    if (!found) {
      c.header("WWW-Authenticate", 'Bearer realm="kubefn"');
      return c.json({ error: "Unauthorized" }, 401);
    }
    if (!mayUseCluster(found, cluster)) {
      return c.json({ error: "Forbidden", message: `this credential may not use cluster ${cluster}` }, 403);
    }
    c.set(crawlerKey as never, found as never);
    await next();
  };
}
