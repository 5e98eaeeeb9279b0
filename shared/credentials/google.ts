/**
 * Google service-account credentials: the key file kubefn reads (`KUBE_GOOGLE_CREDENTIALS` of the
 * platforms, and any operator's own), and the OAuth 2.0 tokens it exchanges for them — for GKE's
 * API server, or for a Google API an operator calls.
 */
import { onceUntilFailure, sharedInFlight } from "../concurrency/index.ts";
import { parseJsonOrUndefined } from "../guards/index.ts";
import { type TokenSource as KubeTokenSource, ReconcileError } from "../kube/index.ts";
import type { Clock } from "../runtime/index.ts";
import * as z from "../zod/index.ts";

/** The fields kubefn reads from a Google service-account key file (JSON). */
export interface ServiceAccountKey {
  client_email: string;
  /** PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----"). */
  private_key: string;
  private_key_id?: string;
  /** Defaults to {@link googleTokenUri}. */
  token_uri?: string;
}

const serviceAccountKeySchema = z.object({
  client_email: z.string().check(z.minLength(1)),
  private_key: z.string().check(z.includes("PRIVATE KEY")),
  private_key_id: z.optional(z.string()),
  token_uri: z.optional(z.url()),
});

/**
 * A Google service-account key file's JSON (`client_email`, `private_key`, ...), or undefined when
 * `text` is not one. For the platforms' `KUBE_GOOGLE_CREDENTIALS` and an operator's own keys.
 */
export function parseServiceAccountKey(text: string): ServiceAccountKey | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = serviceAccountKeySchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

export const googleTokenUri = "https://oauth2.googleapis.com/token";
export const computeScope = "https://www.googleapis.com/auth/compute";
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const assertionLifetimeSeconds = 3600;
/** A cached token is replaced this long before it expires (half its life, for a token shorter than 2 minutes). */
const refreshMarginSeconds = 60;
/** The token request's deadline. */
const exchangeTimeoutMs = 30_000;
/** An exchange older than this is lost, not slow (see {@link sharedInFlight}): its deadline and a little more. */
const exchangeGivenUpMs = exchangeTimeoutMs + 5_000;
/**
 * The scopes GKE accepts a service account's access token with (those `gke-gcloud-auth-plugin`
 * asks for): GKE reads the account's email and authorizes it by IAM and RBAC.
 */
export const gkeScopes =
  "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email";

/** Hands out OAuth 2.0 access tokens. */
export interface TokenSource {
  /** A valid access token, from the cache while it has more than a minute left. */
  token(): Promise<string>;
  /** Forget the cached token (the API answered 401). */
  invalidate(): void;
}

/** How a failed exchange is thrown: a {@link ReconcileError} unless the caller has its own class. */
export type TokenFailure = (
  errorClass: "permanent" | "transient",
  reason: string,
  message: string,
  opts: { cause?: unknown },
) => Error;

export interface ServiceAccountTokenSourceOptions {
  key: ServiceAccountKey;
  fetch: typeof fetch;
  clock: Clock;
  scope?: string;
  /** Builds the error of a failed exchange or a bad key (default: a {@link ReconcileError}). */
  failure?: TokenFailure;
}

const reconcileFailure: TokenFailure = (errorClass, reason, message, opts) =>
  new ReconcileError(errorClass, reason, message, opts);

/**
 * The OAuth 2.0 JWT bearer grant (RFC 7523) for a service account: an RS256 assertion signed with
 * Web Crypto, exchanged at `token_uri` for an access token. Runs wherever `fetch` and
 * `crypto.subtle` do.
 *
 * Caveats: the token is cached in the returned object only; a new instance (a cold start) fetches
 * a new token. Concurrent callers share one in-flight exchange, for at most 35 s: on Workers an
 * exchange whose invocation was cut off may never settle, and must not hold the isolate's later
 * callers.
 */
export function createServiceAccountTokenSource(opts: ServiceAccountTokenSourceOptions): TokenSource {
  // Called unbound: workerd's fetch throws "Illegal invocation" when called as a method of
  // another object (opts.fetch(...)), which made every token request fail on Workers.
  const { key, clock, fetch: fetchToken } = opts;
  const scope = opts.scope ?? computeScope;
  const tokenUri = key.token_uri ?? googleTokenUri;
  const failure = opts.failure ?? reconcileFailure;
  const signingKey = onceUntilFailure(() => importPrivateKey(key.private_key, failure));
  let cached: { token: string; renewAtMs: number } | undefined;

  async function exchange(): Promise<string> {
    const nowSeconds = Math.floor(clock.now().getTime() / 1000);
    const assertion = await signJwt(await signingKey(), {
      header: { alg: "RS256", typ: "JWT", ...(key.private_key_id ? { kid: key.private_key_id } : {}) },
      claims: {
        iss: key.client_email,
        scope,
        aud: tokenUri,
        iat: nowSeconds,
        exp: nowSeconds + assertionLifetimeSeconds,
      },
    });
    let res: Response;
    try {
      res = await fetchToken(tokenUri, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({ grant_type: jwtBearerGrant, assertion }).toString(),
        signal: AbortSignal.timeout(exchangeTimeoutMs),
        // A redirect would re-post the signed assertion elsewhere (a 307/308 keeps the body).
        redirect: "manual",
      });
    } catch (err) {
      throw failure("transient", "TokenUnavailable", `token request to ${tokenUri} failed`, { cause: err });
    }
    const text = await res.text();
    const body = parseJsonOrUndefined(text) as
      | { access_token?: unknown; expires_in?: unknown; error?: unknown }
      | undefined;
    if (!res.ok || typeof body?.access_token !== "string") {
      const detail = typeof body?.error === "string" ? text.slice(0, 300) : `HTTP ${res.status}`;
      const message = `token request for ${key.client_email} refused: ${detail}`;
      // 400/401 are invalid_grant, invalid_client, ...: bad or revoked credentials.
      if (res.status === 400 || res.status === 401 || res.status === 403) {
        throw failure("permanent", "AuthenticationFailed", message, {});
      }
      throw failure("transient", "TokenUnavailable", message, {});
    }
    const expiresIn = typeof body.expires_in === "number" ? body.expires_in : assertionLifetimeSeconds;
    const marginSeconds = Math.min(refreshMarginSeconds, expiresIn / 2);
    cached = {
      token: body.access_token,
      renewAtMs: clock.now().getTime() + (expiresIn - marginSeconds) * 1000,
    };
    return body.access_token;
  }
  const exchangeShared = sharedInFlight(exchange, exchangeGivenUpMs, () => clock.now().getTime());

  return {
    async token() {
      const fresh = cached && clock.now().getTime() < cached.renewAtMs;
      if (cached && fresh) return cached.token;
      return exchangeShared();
    },
    invalidate() {
      cached = undefined;
    },
  };
}

/**
 * The Kubernetes transports' view of a {@link TokenSource}: the same tokens as the API server's
 * bearer (a GKE cluster, or any cluster whose token webhook asks Google), a 401 dropping the
 * cached one for a fresh exchange.
 */
export function kubeTokenSourceFrom(google: TokenSource): KubeTokenSource {
  return {
    token: () => google.token(),
    async renew(rejected) {
      google.invalidate();
      const token = await google.token();
      return token === rejected ? undefined : token;
    },
  };
}

export interface Jwt {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
}

/** A compact JWS: base64url(header).base64url(claims).base64url(RSASSA-PKCS1-v1_5/SHA-256 signature). */
export async function signJwt(key: CryptoKey, jwt: Jwt): Promise<string> {
  const signingInput = `${base64UrlFromString(JSON.stringify(jwt.header))}.${base64UrlFromString(JSON.stringify(jwt.claims))}`;
  const signature = await crypto.subtle.sign(
    "RSASSA-PKCS1-v1_5",
    key,
    new TextEncoder().encode(signingInput),
  );
  return `${signingInput}.${base64UrlFromBytes(new Uint8Array(signature))}`;
}

/** Imports a PKCS#8 PEM private key for RS256 signing. */
export async function importPrivateKey(pem: string, failure = reconcileFailure): Promise<CryptoKey> {
  try {
    return await crypto.subtle.importKey(
      "pkcs8",
      bytesFromPem(pem, "PRIVATE KEY"),
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["sign"],
    );
  } catch (err) {
    throw failure("permanent", "InvalidCredentials", "service account private_key is not a PKCS#8 RSA key", {
      cause: err,
    });
  }
}

/** The DER bytes inside a PEM block labelled `label`. */
export function bytesFromPem(pem: string, label: string): Uint8Array<ArrayBuffer> {
  const match = new RegExp(`-----BEGIN ${label}-----([^-]*)-----END ${label}-----`).exec(pem);
  if (!match?.[1]) throw new TypeError(`no ${label} PEM block`);
  return bytesFromBase64(match[1].replace(/\s+/g, ""));
}

/** PEM text for DER bytes. */
export function pemFromBytes(der: Uint8Array, label: string): string {
  const b64 = base64FromBytes(der).replace(/.{1,64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

export function base64UrlFromBytes(bytes: Uint8Array): string {
  return base64FromBytes(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function bytesFromBase64Url(s: string): Uint8Array<ArrayBuffer> {
  return bytesFromBase64(s.replace(/-/g, "+").replace(/_/g, "/"));
}

function base64UrlFromString(s: string): string {
  return base64UrlFromBytes(new TextEncoder().encode(s));
}

function base64FromBytes(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function bytesFromBase64(b64: string): Uint8Array<ArrayBuffer> {
  const binary = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
