import type { TokenSource } from "../kube/index.ts";

/**
 * kubefn as its own OIDC issuer: it signs short-lived JWTs for the API server with a key from its
 * platform's secret store and serves the discovery document and JWKS the API server's JWT
 * authenticator (structured authentication configuration) verifies them with. Web Crypto only, so
 * a Worker (which has no cloud identity) holds no long-lived API token: the one long-lived secret
 * is the signing key, which never leaves the secret store.
 *
 * Rotation: the setting holds a JWK set; the first key signs, every key is published. Add the new
 * key second, wait until the API server has fetched the JWKS (it refetches on an unknown `kid`),
 * move it first, and drop the old one once the longest token signed with it has expired.
 */

/** A private signing key as a JWK: EC P-256 (ES256) or RSA (RS256), with its `kid`. */
export interface SigningJwk {
  kty: "EC" | "RSA";
  kid: string;
  crv?: string;
  x?: string;
  y?: string;
  n?: string;
  e?: string;
  d: string;
  [member: string]: unknown;
}

/** A public key as the JWKS publishes it. */
export interface PublicJwk {
  kty: "EC" | "RSA";
  kid: string;
  use: "sig";
  alg: "ES256" | "RS256";
  crv?: string;
  x?: string;
  y?: string;
  n?: string;
  e?: string;
}

/** The imported keys: the first signs, all are published. */
export interface SigningKeys {
  signer: { kid: string; alg: "ES256" | "RS256"; key: CryptoKey };
  published: PublicJwk[];
}

/** The path of the JWKS under the issuer URL (as the API server's own issuer serves it). */
export const JWKS_PATH = "/openid/v1/jwks";
/** The discovery document's path under the issuer URL (OpenID Connect Discovery 1.0). */
export const DISCOVERY_PATH = "/.well-known/openid-configuration";

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array | string): string {
  const raw = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  let s = "";
  for (const b of raw) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The JWKs a setting holds: one private JWK, or a set `{"keys": [...]}`, first one signing. */
export function signingJwksFrom(text: string): SigningJwk[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error("the signing key must be a private JWK or a JWK set (JSON)");
  }
  const keys = (value as { keys?: unknown }).keys ?? [value];
  if (!Array.isArray(keys) || keys.length === 0) throw new Error("the JWK set holds no key");
  return keys.map((k: Partial<SigningJwk>, i) => {
    const where = `key ${i + 1}${k.kid ? ` (${k.kid})` : ""}`;
    if (typeof k.kid !== "string" || k.kid === "") throw new Error(`${where} has no kid`);
    if (typeof k.d !== "string") throw new Error(`${where} is not a private key (no d)`);
    if (k.kty === "EC" && k.crv !== "P-256") throw new Error(`${where}: only the EC curve P-256 (ES256)`);
    if (k.kty !== "EC" && k.kty !== "RSA") throw new Error(`${where}: kty must be EC (P-256) or RSA`);
    return k as SigningJwk;
  });
}

const algOf = (jwk: SigningJwk) => (jwk.kty === "EC" ? "ES256" : "RS256");

function publicOf(jwk: SigningJwk): PublicJwk {
  return jwk.kty === "EC"
    ? { kty: "EC", kid: jwk.kid, use: "sig", alg: "ES256", crv: "P-256", x: jwk.x ?? "", y: jwk.y ?? "" }
    : { kty: "RSA", kid: jwk.kid, use: "sig", alg: "RS256", n: jwk.n ?? "", e: jwk.e ?? "" };
}

/**
 * Imports the signing keys of a setting (see {@link signingJwksFrom}).
 *
 * @throws when the setting is no private JWK (set) or a key does not import.
 */
export async function importSigningKeys(text: string): Promise<SigningKeys> {
  const jwks = signingJwksFrom(text);
  const first = jwks[0] as SigningJwk;
  const { kid: _kid, use: _use, alg: _alg, key_ops: _ops, ...material } = first;
  const key = await crypto.subtle.importKey(
    "jwk",
    material as JsonWebKey,
    first.kty === "EC"
      ? { name: "ECDSA", namedCurve: "P-256" }
      : { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return { signer: { kid: first.kid, alg: algOf(first), key }, published: jwks.map(publicOf) };
}

/** The claims kubefn's tokens carry. */
export interface IssuedClaims {
  iss: string;
  sub: string;
  aud: string;
  iat: number;
  nbf: number;
  exp: number;
}

/** A compact JWS of `claims`, signed by the keys' signer (header `alg`, `kid`, `typ: JWT`). */
export async function signJwt(keys: SigningKeys, claims: IssuedClaims): Promise<string> {
  const { signer } = keys;
  const input = `${base64url(JSON.stringify({ alg: signer.alg, kid: signer.kid, typ: "JWT" }))}.${base64url(JSON.stringify(claims))}`;
  const signature = await crypto.subtle.sign(
    signer.alg === "ES256" ? { name: "ECDSA", hash: "SHA-256" } : { name: "RSASSA-PKCS1-v1_5" },
    signer.key,
    encoder.encode(input),
  );
  return `${input}.${base64url(new Uint8Array(signature))}`;
}

/**
 * What the issuer publishes, from the signing-key setting alone (no key is imported): the
 * discovery document at `{issuer}/.well-known/openid-configuration` and the JWKS it names, every
 * key of the setting's set (public parts only), and the path prefix both are served under.
 */
export function issuerDocuments(
  issuer: string,
  signingKey: string,
): { prefix: string; discovery: Record<string, unknown>; jwks: { keys: PublicJwk[] } } {
  const published = signingJwksFrom(signingKey).map(publicOf);
  return {
    prefix: new URL(issuer).pathname.replace(/\/+$/, ""),
    discovery: {
      issuer,
      jwks_uri: `${issuer.replace(/\/+$/, "")}${JWKS_PATH}`,
      response_types_supported: ["id_token"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: [...new Set(published.map((k) => k.alg))],
    },
    jwks: { keys: published },
  };
}

/** What the issuer needs: who it is, whom it names, for how long, with which keys. */
export interface IssuerOptions {
  /** The https URL the API server fetches discovery and the JWKS from; the tokens' `iss`. */
  issuer: string;
  /** The tokens' `aud`: the audience of the API server's JWT authenticator. */
  audience: string;
  /** The tokens' `sub`, which the authenticator maps to kubefn's username. */
  subject: string;
  /** How long a token is valid; renewed once less than a fifth of it is left. */
  validitySeconds: number;
  keys: SigningKeys;
  /** Seconds since the epoch. */
  now(): number;
}

/**
 * A token source (shared/kube's TokenSource) that mints kubefn's JWTs: the cached token while
 * more than a fifth of its validity is left, a fresh one after that, and a fresh one when the API
 * server refused the current one (a 401, e.g. after a clock step). `renew: false` keeps the first
 * token for ever: what a static credential does, for the tests that show renewal matters.
 *
 * Caveats: `iat` and `nbf` are set 30 s in the past, for an API server whose clock is behind.
 */
export function issuedTokenSource(options: IssuerOptions, renew = true): TokenSource {
  let current: { token: string; exp: number } | undefined;
  let minting: Promise<string> | undefined;
  const mint = () => {
    minting ??= (async () => {
      const now = Math.floor(options.now());
      const exp = now + options.validitySeconds;
      const token = await signJwt(options.keys, {
        iss: options.issuer,
        sub: options.subject,
        aud: options.audience,
        iat: now - 30,
        nbf: now - 30,
        exp,
      });
      current = { token, exp };
      return token;
    })().finally(() => {
      minting = undefined;
    });
    return minting;
  };
  return {
    async token(): Promise<string> {
      if (current && (!renew || current.exp - options.now() > options.validitySeconds / 5)) {
        return current.token;
      }
      return mint();
    },
    async renew(rejected: string): Promise<string | undefined> {
      if (!renew) return undefined;
      if (current && current.token !== rejected) return current.token;
      return mint();
    },
  };
}
