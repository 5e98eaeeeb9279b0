import type { MiddlewareHandler } from "hono";

const encoder = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/**
 * Whether `presented` equals `expected`, in time independent of where they differ and of their
 * lengths: both are hashed with SHA-256 and the digests compared byte by byte without an early
 * exit. Web Crypto only, so it runs on every platform.
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(presented), digest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/**
 * Hono middleware admitting requests with `Authorization: Bearer <apiToken>`; anything else gets
 * 401 `{ error: "Unauthorized" }` with `WWW-Authenticate: Bearer`. Shared by the discovery and
 * lease routes.
 *
 * Caveats: throws at construction for an empty token, so a missing secret fails the host's start
 * rather than opening the API.
 *
 * @example
 * app.use("/v1/*", bearerAuth(config.apiToken));
 */
export function bearerAuth(apiToken: string): MiddlewareHandler {
  if (apiToken === "") throw new Error("bearerAuth: the API token is empty");
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!match?.[1] || !(await tokensEqual(match[1], apiToken))) {
      c.header("WWW-Authenticate", 'Bearer realm="kubefn"');
      return c.json({ error: "Unauthorized" }, 401);
    }
    await next();
  };
}
