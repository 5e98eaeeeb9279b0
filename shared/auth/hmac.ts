/** HMAC-SHA256 with Web Crypto (Node, Workers and Lambda alike). */

const encoder = new TextEncoder();

/**
 * The HMAC-SHA256 of `message` under `secret` (both as UTF-8).
 *
 * @example
 * toBase64Url(await hmacSha256(secret, "kubefn status seal key v1"))
 */
export async function hmacSha256(secret: string, message: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}
