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
 * can neither renew nor release another's lease) and the namespaces whose proxies it may see and
 * lease (`"*"`: every namespace).
 *
 * `secret`: the plain API token itself. It is not a crawler credential: crawlers present a token
 * derived from it for one namespace ({@link namespaceToken}); only the fleet page takes it as it is.
 */
export interface CrawlerCredential {
  name: string;
  token: string;
  namespaces: readonly string[] | "*";
  secret?: true;
}

const credentialSchema = z.object({
  name: z.string().check(z.regex(/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/, "a DNS label")),
  token: z.string().check(z.minLength(16, "at least 16 characters")),
  namespaces: z.union([
    z.literal("*"),
    z.array(z.string().check(z.minLength(1)).check(z.maxLength(63))).check(z.minLength(1)),
  ]),
});

/**
 * The crawler credentials in the API token setting: either a JSON array of
 * `{ name, token, namespaces: [...] | "*" }` — where `"*"` is the explicit choice of a
 * cluster-wide crawler — or one plain token, the API secret: crawlers then present the token of
 * their namespace ({@link namespaceToken}), which sees and leases that namespace's proxies only.
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
  const mac = await hmacSha256(secret, `kubefn crawler namespace\n${namespace}`);
  const b64 = btoa(String.fromCharCode(...mac))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
  return `${namespaceTokenPrefix}.${namespace}.${b64}`;
}

/** Whether `credential` may use proxies in `namespace`. */
export function mayUseNamespace(credential: CrawlerCredential, namespace: string): boolean {
  return credential.namespaces === "*" || credential.namespaces.includes(namespace);
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
  for (const credential of credentials) {
    if (credential.secret && namespace !== undefined) {
      const expected = await namespaceToken(credential.token, namespace);
      if ((await tokensEqual(presented, expected)) && !found) {
        found = { name: `ns.${namespace}`, token: presented, namespaces: [namespace] };
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
 * from it ({@link namespaceToken}); anything else — the API secret itself too — gets 401
 * `{ error: "Unauthorized" }` with `WWW-Authenticate: Bearer`. The credential is available to
 * the route through {@link crawlerOf}. Shared by the discovery and lease routes.
 *
 * Caveats: throws at construction for an empty or malformed setting, so a missing secret fails the
 * host's start rather than opening the API. Every credential is compared (constant time each), so
 * the answer's timing does not tell which one nearly matched.
 *
 * @example
 * app.use("/v1/*", bearerAuth(config.apiToken));
 */
export function bearerAuth(apiToken: string): MiddlewareHandler {
  const credentials = parseCrawlerCredentials(apiToken);
  return async (c, next) => {
    const found = await credentialOf(credentials, bearerToken(c.req.header("authorization")));
    if (!found) {
      c.header("WWW-Authenticate", 'Bearer realm="kubefn"');
      return c.json({ error: "Unauthorized" }, 401);
    }
    c.set(crawlerKey as never, found as never);
    await next();
  };
}
