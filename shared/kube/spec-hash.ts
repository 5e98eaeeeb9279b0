/**
 * Canonical JSON: object keys sorted recursively, `undefined` members dropped (as JSON.stringify
 * does), so two values equal as data give the same string whatever their key order.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? "null";
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member !== undefined) out[key] = sortKeys(member);
  }
  return out;
}

/**
 * SHA-256 of the canonical JSON of `value`, as 64 lowercase hex digits (Web Crypto: Node 24 and
 * Workers alike).
 *
 * Caveats: the full digest is returned; slice it yourself if a name or label needs it shorter
 * (label values are capped at 63 characters). Changing what goes into the hash changes every hash,
 * which reads as a spec change everywhere — version the input, not the function.
 */
export async function specHash(value: unknown): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson(value)));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * FNV-1a, 32 bit, of a string's UTF-16 code units: a fast, stable, non-cryptographic hash for
 * spreading keys (sweep buckets, probe phases) and short deterministic name suffixes.
 */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
