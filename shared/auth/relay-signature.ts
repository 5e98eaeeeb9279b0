/**
 * Relay batch signatures: HMAC-SHA256 over `${timestamp}.${body}`, hex-encoded, sent as
 * `X-Kubefn-Signature: sha256=<hex>` beside `X-Kubefn-Timestamp: <unix seconds>`.
 *
 * Verification uses `crypto.subtle.verify`, which compares in constant time, and rejects
 * timestamps older than the replay window or more than {@link maxFutureSkewSeconds} ahead.
 * `checkSignatureHeaders` judges the headers alone, so a request can be refused before its body
 * is read; replays within the window are refused by the intake's `ReplayGuard` (replay.ts).
 */

import { tokensEqual } from "./tokens.ts";

export const SIGNATURE_HEADER = "x-kubefn-signature";
export const TIMESTAMP_HEADER = "x-kubefn-timestamp";

const encoder = new TextEncoder();

async function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
    "verify",
  ]);
}

function toHex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> | undefined {
  if (hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) return undefined;
  const out = new Uint8Array(new ArrayBuffer(hex.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Headers a relay sends with `body`, signed at `nowSeconds`. */
export async function signBatch(
  secret: string,
  body: string,
  nowSeconds: number,
): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(nowSeconds));
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(`${timestamp}.${body}`));
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: `sha256=${toHex(mac)}` };
}

/** How far a relay's clock may run ahead of the intake's before its timestamps are refused. */
export const maxFutureSkewSeconds = 5;

export type SignatureRefusal =
  | "MissingSignature"
  | "MalformedSignature"
  | "StaleTimestamp"
  | "FutureTimestamp"
  | "BadSignature";

export type SignatureVerdict = { ok: true } | { ok: false; reason: SignatureRefusal };

/** Signature headers that passed {@link checkSignatureHeaders}. */
export interface CheckedHeaders {
  mac: Uint8Array<ArrayBuffer>;
  timestamp: string;
  timestampSeconds: number;
  /**
   * The signature in one spelling (lower-case hex), for replay guards: the header's hex may be
   * written in any letter case, and every spelling verifies.
   */
  replayKey: string;
}

/**
 * The headers alone: both present, well-formed, and the timestamp neither older than the window
 * nor more than {@link maxFutureSkewSeconds} ahead. Needs no body, so it runs before the read.
 */
export function checkSignatureHeaders(
  headers: { signature: string | undefined; timestamp: string | undefined },
  nowSeconds: number,
  windowSeconds: number,
): { ok: true; checked: CheckedHeaders } | { ok: false; reason: SignatureRefusal } {
  if (!headers.signature || !headers.timestamp) return { ok: false, reason: "MissingSignature" };
  const mac = headers.signature.startsWith("sha256=") ? fromHex(headers.signature.slice(7)) : undefined;
  if (mac?.length !== 32 || !/^\d{1,12}$/.test(headers.timestamp)) {
    return { ok: false, reason: "MalformedSignature" };
  }
  const timestampSeconds = Number(headers.timestamp);
  if (timestampSeconds > nowSeconds + maxFutureSkewSeconds) return { ok: false, reason: "FutureTimestamp" };
  if (nowSeconds - timestampSeconds > windowSeconds) return { ok: false, reason: "StaleTimestamp" };
  return {
    ok: true,
    checked: {
      mac,
      timestamp: headers.timestamp,
      timestampSeconds,
      replayKey: headers.signature.toLowerCase(),
    },
  };
}

/** Whether the MAC in checked headers is the body's (constant-time). */
export async function verifyBody(secret: string, body: string, checked: CheckedHeaders): Promise<boolean> {
  return crypto.subtle.verify(
    "HMAC",
    await hmacKey(secret),
    checked.mac,
    encoder.encode(`${checked.timestamp}.${body}`),
  );
}

/** Checks a relay batch's signature and timestamp against `secret` and the replay window. */
export async function verifyBatch(
  secret: string,
  body: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  nowSeconds: number,
  windowSeconds: number,
): Promise<SignatureVerdict> {
  const headerVerdict = checkSignatureHeaders(headers, nowSeconds, windowSeconds);
  if (!headerVerdict.ok) return headerVerdict;
  return (await verifyBody(secret, body, headerVerdict.checked))
    ? { ok: true }
    : { ok: false, reason: "BadSignature" };
}

/** Constant-time comparison of a presented bearer token with the expected one. */
export async function bearerMatches(presented: string | undefined, expected: string): Promise<boolean> {
  return presented !== undefined && (await tokensEqual(presented, expected));
}

/**
 * The token of an `Authorization: Bearer <token>` header (the scheme case-insensitive, as RFC 7235
 * has it); `undefined` for any other header or none.
 */
export function bearerToken(header: string | undefined): string | undefined {
  return /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "")?.[1];
}
