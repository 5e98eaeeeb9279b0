import { sharedInFlight } from "../concurrency/index.ts";
import { isRecord } from "../guards/index.ts";
/**
 * Verifies the OpenID Connect tokens Pub/Sub push subscriptions send (`Authorization: Bearer
 * <JWT>`): RS256 signed by Google, checked with Web Crypto against Google's published keys (a
 * JWKS), then the claims: issuer `https://accounts.google.com`, the subscription's audience, the
 * push service account's `email` with `email_verified`, and `exp`/`iat` within a leeway.
 *
 * Caveats: keys rotate; a token whose `kid` is not among the cached keys refetches the JWKS, at
 * most once per `minRefreshSeconds`, so a flood of forged kids cannot turn into a flood of fetches.
 */

/** Issuers Google writes into ID tokens. */
export const GOOGLE_ISSUERS: readonly string[] = ["https://accounts.google.com", "accounts.google.com"];
/** Google's JWKS for ID tokens. */
export const GOOGLE_JWKS_URL = "https://www.googleapis.com/oauth2/v3/certs";

/** An RSA public key as a JWKS lists it. */
export interface RsaJwk {
  kty: string;
  kid?: string;
  n?: string;
  e?: string;
  alg?: string;
  use?: string;
}

/** Where verification keys come from: a fixed set, or a JWKS URL fetched and cached. */
export interface KeySource {
  /** The key with this `kid`; may refetch. Undefined when no such key exists. */
  key(kid: string): Promise<CryptoKey | undefined>;
}

/** The keys could not be fetched: a retry may succeed (intake answers 503). */
export class KeysUnavailableError extends Error {
  override readonly name = "KeysUnavailableError";
}

const importRsa = (jwk: RsaJwk): Promise<CryptoKey> =>
  crypto.subtle.importKey(
    "jwk",
    { kty: jwk.kty, n: jwk.n, e: jwk.e, alg: "RS256", ext: true },
    { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    false,
    ["verify"],
  );

async function importAll(keys: readonly RsaJwk[]): Promise<Map<string, CryptoKey>> {
  const out = new Map<string, CryptoKey>();
  for (const jwk of keys) {
    if (jwk.kty !== "RSA" || !jwk.kid || !jwk.n || !jwk.e) continue;
    if (jwk.use !== undefined && jwk.use !== "sig") continue;
    out.set(jwk.kid, await importRsa(jwk));
  }
  return out;
}

/** A fixed JWKS (settings give it inline, e.g. where the platform may not fetch). */
export function staticKeys(jwks: { keys: readonly RsaJwk[] }): KeySource {
  let keys: Promise<Map<string, CryptoKey>> | undefined;
  return {
    async key(kid) {
      keys ??= importAll(jwks.keys);
      return (await keys).get(kid);
    },
  };
}

/** The JWKS request's deadline. */
const jwksTimeoutMs = 10_000;

/**
 * Keys fetched from `url` and cached for `ttlSeconds` (Google rotates them over days); an unknown
 * `kid` refetches at most once per `minRefreshSeconds`.
 */
export function fetchedKeys(options: {
  url: string;
  fetch?: typeof fetch;
  now: () => number;
  ttlSeconds?: number;
  minRefreshSeconds?: number;
}): KeySource {
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  const ttl = options.ttlSeconds ?? 3600;
  const minRefresh = options.minRefreshSeconds ?? 30;
  let cached: { keys: Map<string, CryptoKey>; at: number } | undefined;
  // Shared by concurrent callers for at most the fetch's deadline and a little more: on Workers a
  // fetch whose invocation was cut off may never settle (see sharedInFlight).
  const refresh = sharedInFlight(
    async (): Promise<Map<string, CryptoKey>> => {
      try {
        const res = await doFetch(options.url, {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(jwksTimeoutMs),
        });
        if (!res.ok) throw new KeysUnavailableError(`JWKS ${options.url} answered ${res.status}`);
        const body = (await res.json()) as { keys?: unknown };
        if (!Array.isArray(body.keys)) throw new KeysUnavailableError(`JWKS ${options.url} has no keys`);
        const keys = await importAll(body.keys as RsaJwk[]);
        cached = { keys, at: options.now() };
        return keys;
      } catch (err) {
        if (err instanceof KeysUnavailableError) throw err;
        throw new KeysUnavailableError(`JWKS ${options.url}: ${(err as Error).message}`, { cause: err });
      }
    },
    jwksTimeoutMs + 5_000,
    () => options.now() * 1000,
  );

  return {
    async key(kid) {
      const now = options.now();
      if (!cached || now - cached.at > ttl) return (await refresh()).get(kid);
      const hit = cached.keys.get(kid);
      if (hit || now - cached.at < minRefresh) return hit;
      return (await refresh()).get(kid);
    },
  };
}

export interface PushTokenPolicy {
  /** The audience the push subscription was created with (`--push-auth-token-audience`). */
  audience: string;
  /** The push subscription's service account (`--push-auth-service-account`). */
  serviceAccountEmail: string;
  keys: KeySource;
  /** Accepted issuers; Google's by default. */
  issuers?: readonly string[];
  /** Clock skew allowed on `exp` and `iat`. Default 60 s. */
  leewaySeconds?: number;
}

export type PushTokenVerdict =
  | { ok: true; email: string }
  | {
      ok: false;
      /** 401: not a token Google signed. 403: a Google token for someone else. */
      status: 401 | 403;
      reason:
        | "MissingToken"
        | "MalformedToken"
        | "UnsupportedAlgorithm"
        | "UnknownKey"
        | "BadSignature"
        | "Expired"
        | "WrongIssuer"
        | "WrongAudience"
        | "WrongServiceAccount"
        | "EmailNotVerified";
    };

const decoder = new TextDecoder();

function base64UrlBytes(s: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error("not base64url");
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4);
  const binary = atob(b64);
  const out = new Uint8Array(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function jsonPart(s: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(decoder.decode(base64UrlBytes(s))) as unknown;
    return isRecord(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks a push request's bearer token against `policy` at `nowSeconds`.
 *
 * @throws KeysUnavailableError when the JWKS cannot be fetched (a retry may help).
 * @example
 * const verdict = await verifyPushToken(header?.slice(7), { audience, serviceAccountEmail, keys }, Date.now() / 1000);
 * if (!verdict.ok) return c.json({ reason: verdict.reason }, verdict.status);
 */
export async function verifyPushToken(
  token: string | undefined,
  policy: PushTokenPolicy,
  nowSeconds: number,
): Promise<PushTokenVerdict> {
  const fail = (status: 401 | 403, reason: Extract<PushTokenVerdict, { ok: false }>["reason"]) =>
    ({ ok: false, status, reason }) as const;
  if (!token) return fail(401, "MissingToken");
  const parts = token.split(".");
  if (parts.length !== 3) return fail(401, "MalformedToken");
  const [h, p, s] = parts as [string, string, string];
  const header = jsonPart(h);
  const claims = jsonPart(p);
  let signature: Uint8Array<ArrayBuffer>;
  try {
    signature = base64UrlBytes(s);
  } catch {
    return fail(401, "MalformedToken");
  }
  if (!header || !claims) return fail(401, "MalformedToken");
  if (header.alg !== "RS256") return fail(401, "UnsupportedAlgorithm");
  if (typeof header.kid !== "string") return fail(401, "UnknownKey");
  const key = await policy.keys.key(header.kid);
  if (!key) return fail(401, "UnknownKey");
  const signed = new TextEncoder().encode(`${h}.${p}`);
  if (!(await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, signature, signed))) {
    return fail(401, "BadSignature");
  }
  const leeway = policy.leewaySeconds ?? 60;
  if (typeof claims.exp !== "number" || claims.exp + leeway < nowSeconds) return fail(401, "Expired");
  if (typeof claims.iat === "number" && claims.iat - leeway > nowSeconds) return fail(401, "Expired");
  if (!(policy.issuers ?? GOOGLE_ISSUERS).includes(String(claims.iss))) return fail(401, "WrongIssuer");
  if (claims.aud !== policy.audience) return fail(403, "WrongAudience");
  if (claims.email !== policy.serviceAccountEmail) return fail(403, "WrongServiceAccount");
  if (claims.email_verified !== true) return fail(403, "EmailNotVerified");
  return { ok: true, email: claims.email };
}
