/**
 * Relay batch signatures: HMAC-SHA256 over `${timestamp}.${body}`, hex-encoded, sent as
 * `X-Kubefn-Signature: sha256=<hex>` beside `X-Kubefn-Timestamp: <unix seconds>`.
 *
 * Verification uses `crypto.subtle.verify`, which compares in constant time, and rejects
 * timestamps outside the replay window.
 *
 * Caveats: the window bounds replay, it does not forbid it: a captured batch can be re-sent
 * within the window. That is harmless here, because a batch only asks for reconcile passes,
 * which are idempotent and deduplicated downstream.
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

export type SignatureVerdict =
  | { ok: true }
  | { ok: false; reason: "MissingSignature" | "MalformedSignature" | "StaleTimestamp" | "BadSignature" };

/** Checks a relay batch's signature and timestamp against `secret` and the replay window. */
export async function verifyBatch(
  secret: string,
  body: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  nowSeconds: number,
  windowSeconds: number,
): Promise<SignatureVerdict> {
  if (!headers.signature || !headers.timestamp) return { ok: false, reason: "MissingSignature" };
  const mac = headers.signature.startsWith("sha256=") ? fromHex(headers.signature.slice(7)) : undefined;
  if (mac?.length !== 32 || !/^\d{1,12}$/.test(headers.timestamp)) {
    return { ok: false, reason: "MalformedSignature" };
  }
  if (Math.abs(nowSeconds - Number(headers.timestamp)) > windowSeconds) {
    return { ok: false, reason: "StaleTimestamp" };
  }
  const valid = await crypto.subtle.verify(
    "HMAC",
    await hmacKey(secret),
    mac!,
    encoder.encode(`${headers.timestamp}.${body}`),
  );
  return valid ? { ok: true } : { ok: false, reason: "BadSignature" };
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
