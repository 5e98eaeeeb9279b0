import type { MiddlewareHandler } from "hono";
import { bearerToken, tokensEqual } from "../../../auth/index.ts";

export { tokensEqual };

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
    const token = bearerToken(c.req.header("authorization"));
    if (!token || !(await tokensEqual(token, apiToken))) {
      c.header("WWW-Authenticate", 'Bearer realm="kubefn"');
      return c.json({ error: "Unauthorized" }, 401);
    }
    await next();
  };
}
