import { Hono } from "hono/tiny";
import {
  DISCOVERY_PATH,
  importSigningKeys,
  issuedTokenSource,
  issuerDocuments,
  JWKS_PATH,
} from "../auth/index.ts";
import type { TokenSource } from "../kube/index.ts";
import type { OidcIssuerSettings } from "./settings.ts";

/**
 * The OIDC issuer's public documents, under the issuer URL's path: the discovery document
 * (`/.well-known/openid-configuration`) and the JWKS it names (`/openid/v1/jwks`), every key of
 * the signing-key setting, public parts only. No credentials: the API server fetches them.
 * Usable before anything else is wired (the Node host serves them while it connects).
 *
 * @example
 * app.route("/", issuerRoutes(settings.oidcIssuer));
 */
export function issuerRoutes(oidc: Pick<OidcIssuerSettings, "issuer" | "signingKey">): Hono {
  const { prefix, discovery, jwks } = issuerDocuments(oidc.issuer, oidc.signingKey);
  const cache = { "cache-control": "public, max-age=60" };
  const app = new Hono();
  app.get(`${prefix}${DISCOVERY_PATH}`, (c) => c.json(discovery, 200, cache));
  app.get(`${prefix}${JWKS_PATH}`, (c) =>
    c.json(jwks, 200, { ...cache, "content-type": "application/jwk-set+json" }),
  );
  return app;
}

/**
 * The token source of kubefn as its own issuer, for the platform's Kubernetes transport: JWTs
 * signed with the first key of `OIDC_SIGNING_KEY`, valid `OIDC_TOKEN_SECONDS`, renewed before they
 * expire and after a 401. The key is imported at the first token. `renew: false` is for the tests
 * that show renewal is needed.
 *
 * Caveats: a key that parses but does not import (a wrong `d`) fails the first request, not the start.
 *
 * @example
 * const tokenSource = issuerTokenSource(settings.oidcIssuer, () => Date.now() / 1000);
 */
export function issuerTokenSource(oidc: OidcIssuerSettings, now: () => number, renew = true): TokenSource {
  let source: Promise<TokenSource> | undefined;
  const ready = () =>
    (source ??= importSigningKeys(oidc.signingKey).then((keys) =>
      issuedTokenSource(
        {
          issuer: oidc.issuer,
          audience: oidc.audience,
          subject: oidc.subject,
          validitySeconds: oidc.tokenSeconds,
          keys,
          now,
        },
        renew,
      ),
    ));
  return {
    token: async () => (await ready()).token(),
    renew: async (rejected) => (await ready()).renew(rejected),
  };
}
