/**
 * The API tunnel: how a Worker, which cannot trust a cluster's private CA and should not need the
 * API server exposed at all, reaches it through the relay, which already runs in the cluster.
 *
 * The relay dials out (a WebSocket to the Worker's `GET /v1/tunnel`, signed with the relay's
 * HMAC secret, each opening accepted once); the Worker sends each API request down that socket
 * as a {@link TunnelRequest} signed with the same secret; the relay checks it
 * ({@link admitTunnelRequest}), sends it to its own API server over the cluster's TLS and
 * answers with a {@link TunnelResponse}. The Worker's bearer token goes through unchanged and
 * is what the API server authenticates: the relay adds no credential of its own.
 *
 * Caveats: the relay sees kubefn's bearer token in transit (it is in the cluster already, with a
 * read-only identity of its own); bodies are UTF-8 text (the API's JSON), not bytes.
 */
import { hmacSha256 } from "../auth/index.ts";

/** The Worker's path the relay opens the tunnel on. */
export const TUNNEL_PATH = "/v1/tunnel";

/** How far a signed opening or request may be from the verifier's clock, either way. */
export const TUNNEL_SKEW_SECONDS = 60;

/** The request headers that travel; every other header of the Worker's request is dropped. */
export const TUNNEL_HEADERS: readonly string[] = ["accept", "authorization", "content-type"];

/** One API request, Worker → relay. */
export interface TunnelRequest {
  type: "request";
  /** Unique per request (the relay refuses a second request with the same id). */
  id: string;
  /** Unix seconds at signing. */
  time: number;
  method: string;
  /** Path and query, e.g. `/apis/crawl.kubefn.dev/v1alpha1/proxies?limit=500`. */
  path: string;
  /** Only {@link TUNNEL_HEADERS}, lower-case names. */
  headers: Record<string, string>;
  body?: string;
  /** base64url HMAC-SHA256 of {@link requestSigningText} under the relay secret. */
  signature: string;
}

/** The API server's answer, relay → Worker; or the relay's own refusal (`refused`). */
export interface TunnelResponse {
  type: "response";
  id: string;
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Set when the relay, not the API server, answered: why it did not forward the request. */
  refused?: string;
}

export type TunnelFrame = TunnelRequest | TunnelResponse;

const toBase64Url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");

/** What a request's signature covers: every field the relay acts on, in one fixed order. */
export function requestSigningText(r: Omit<TunnelRequest, "signature" | "type">): string {
  const headers = Object.keys(r.headers)
    .sort()
    .map((k) => [k, r.headers[k]]);
  return JSON.stringify([
    "kubefn-tunnel-request v1",
    r.id,
    r.time,
    r.method,
    r.path,
    headers,
    r.body ?? null,
  ]);
}

/** Signs one API request for the relay. */
export async function signTunnelRequest(
  secret: string,
  r: Omit<TunnelRequest, "signature" | "type">,
): Promise<TunnelRequest> {
  return { type: "request", ...r, signature: toBase64Url(await hmacSha256(secret, requestSigningText(r))) };
}

/** The query of the relay's `GET /v1/tunnel`: when it signed, a nonce, and the signature of both. */
export async function signTunnelOpening(
  secret: string,
  nowSeconds: number,
  nonce: string,
): Promise<URLSearchParams> {
  const time = String(Math.floor(nowSeconds));
  const signature = toBase64Url(await hmacSha256(secret, `kubefn-tunnel-open v1\n${time}\n${nonce}`));
  return new URLSearchParams({ time, nonce, signature });
}

/** Why an opening or a request is refused; `ok` when it is not. */
export type TunnelVerdict =
  | { ok: true }
  | { ok: false; reason: "unsigned" | "bad-signature" | "stale" | "not-api" | "method" | "malformed" };

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

const fresh = (time: number, nowSeconds: number) =>
  Number.isFinite(time) && Math.abs(nowSeconds - time) <= TUNNEL_SKEW_SECONDS;

/** Checks the relay's opening query (signature and clock); the caller refuses a replayed nonce. */
export async function verifyTunnelOpening(
  secret: string,
  query: URLSearchParams,
  nowSeconds: number,
): Promise<TunnelVerdict> {
  const time = query.get("time");
  const nonce = query.get("nonce");
  const signature = query.get("signature");
  if (!time || !nonce || !signature) return { ok: false, reason: "unsigned" };
  if (!/^\d+$/.test(time) || nonce.length < 16 || nonce.length > 128)
    return { ok: false, reason: "malformed" };
  const expected = await signTunnelOpening(secret, Number(time), nonce);
  if (!constantTimeEqual(expected.get("signature") ?? "", signature))
    return { ok: false, reason: "bad-signature" };
  if (!fresh(Number(time), nowSeconds)) return { ok: false, reason: "stale" };
  return { ok: true };
}

const methods: ReadonlySet<string> = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);

/**
 * Whether a path is the Kubernetes API's and nothing else: `/api`, `/apis` or `/version` and
 * below, no dot segments, no encoded slashes or dots, no watch, log follow or upgrade
 * (the Worker lists, gets and writes; it never streams), no service or node proxy subresource.
 */
export function isApiPath(path: string): boolean {
  const [pathname = "", query = ""] = path.split("?", 2);
  if (!/^\/(api|apis|version)(\/|$)/.test(pathname)) return false;
  if (/%2f|%2e|%5c|\\/i.test(pathname)) return false;
  const segments = pathname.split("/");
  if (segments.some((s) => s === "." || s === "..")) return false;
  if (
    segments.includes("proxy") ||
    segments.includes("exec") ||
    segments.includes("attach") ||
    segments.includes("portforward")
  )
    return false;
  const params = new URLSearchParams(query);
  if (params.get("watch") === "true" || params.get("watch") === "1" || params.has("follow")) return false;
  return true;
}

/**
 * The relay's decision on one frame the Worker sent (pure but for the HMAC): a signed, fresh
 * request for the Kubernetes API, or a refusal with its reason. The caller refuses a replayed id.
 */
export async function admitTunnelRequest(
  secret: string,
  frame: unknown,
  nowSeconds: number,
): Promise<{ verdict: TunnelVerdict; request?: TunnelRequest }> {
  const r = frame as Partial<TunnelRequest> | null;
  if (
    r?.type !== "request" ||
    typeof r.id !== "string" ||
    typeof r.time !== "number" ||
    typeof r.method !== "string" ||
    typeof r.path !== "string" ||
    typeof r.headers !== "object" ||
    r.headers === null ||
    (r.body !== undefined && typeof r.body !== "string")
  )
    return { verdict: { ok: false, reason: "malformed" } };
  if (typeof r.signature !== "string") return { verdict: { ok: false, reason: "unsigned" } };
  const headers = r.headers as Record<string, unknown>;
  if (Object.entries(headers).some(([k, v]) => !TUNNEL_HEADERS.includes(k) || typeof v !== "string"))
    return { verdict: { ok: false, reason: "malformed" } };
  const request = r as TunnelRequest;
  const expected = await signTunnelRequest(secret, {
    id: request.id,
    time: request.time,
    method: request.method,
    path: request.path,
    headers: request.headers,
    ...(request.body !== undefined ? { body: request.body } : {}),
  });
  if (!constantTimeEqual(expected.signature, request.signature))
    return { verdict: { ok: false, reason: "bad-signature" } };
  if (!fresh(request.time, nowSeconds)) return { verdict: { ok: false, reason: "stale" } };
  if (!methods.has(request.method)) return { verdict: { ok: false, reason: "method" } };
  if (!isApiPath(request.path)) return { verdict: { ok: false, reason: "not-api" } };
  return { verdict: { ok: true }, request };
}
