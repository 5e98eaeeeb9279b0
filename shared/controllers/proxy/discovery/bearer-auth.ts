import type { Context as HonoContext, MiddlewareHandler } from "hono";
import { bearerToken, tokensEqual } from "../../../auth/index.ts";
import * as z from "../../../zod/index.ts";

export { tokensEqual };

/**
 * One crawler's credential: its name (which prefixes every lease holder it asserts, so one crawler
 * can neither renew nor release another's lease) and the namespaces whose proxies it may see and
 * lease (`"*"`: every namespace).
 */
export interface CrawlerCredential {
  name: string;
  token: string;
  namespaces: readonly string[] | "*";
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
 * `{ name, token, namespaces: [...] | "*" }`, or (as before) one plain token, which is the crawler
 * `crawler` with every namespace.
 *
 * @throws Error naming what is wrong: a bad setting must stop the start, never open the API.
 * @example
 * parseCrawlerCredentials('[{"name":"team-a","token":"…","namespaces":["crawl-a"]}]')
 */
export function parseCrawlerCredentials(setting: string): CrawlerCredential[] {
  const text = setting.trim();
  if (text === "") throw new Error("the crawler API token setting is empty");
  if (!text.startsWith("[")) return [{ name: "crawler", token: text, namespaces: "*" }];
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

/** Whether `credential` may use proxies in `namespace`. */
export function mayUseNamespace(credential: CrawlerCredential, namespace: string): boolean {
  return credential.namespaces === "*" || credential.namespaces.includes(namespace);
}

/** The holder identity stored in a Lease: the crawler's name and the holder it asserted. */
export function boundHolder(credential: CrawlerCredential, holder: string): string {
  return `${credential.name}/${holder}`;
}

/**
 * The credential whose token is `presented`, if any. Every credential is compared (constant time
 * each), so the answer's timing does not tell which one nearly matched.
 */
export async function credentialOf(
  credentials: readonly CrawlerCredential[],
  presented: string | undefined,
): Promise<CrawlerCredential | undefined> {
  let found: CrawlerCredential | undefined;
  if (presented) {
    for (const credential of credentials) {
      if ((await tokensEqual(presented, credential.token)) && !found) found = credential;
    }
  }
  return found;
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
 * credentials in `apiToken` (see {@link parseCrawlerCredentials}); anything else gets 401
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
