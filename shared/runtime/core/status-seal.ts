/**
 * The status seal: kubefn's mark on the status it writes, so that a status written with kubefn's
 * own Kubernetes identity but not by kubefn (a stolen token) is told apart from kubefn's.
 *
 * `status.seal` = `v1.` + base64url(HMAC-SHA256(key, UID, canonical status)), where the
 * canonical status is the status without the seal and without {@link UNSEALED_STATUS_FIELDS}
 * (the sweep's probe bookkeeping, which it writes without a pass), with object keys sorted. The
 * key is a platform secret (`STATUS_SEAL_KEY`: a Worker secret, Secrets Manager, the host's
 * Secret) that kubefn's Kubernetes identity cannot read, so whoever holds only the token cannot
 * seal a status. Stateless: every instance that has the key verifies every other's writes.
 *
 * Caveats: a seal binds a status to one object (its UID), not to a time: an earlier status
 * kubefn wrote for the same object, replayed with its seal, verifies (the next pass recomputes
 * it from the world anyway). `health`, `latencyMillis` and `lastHealthCheckTime` are not sealed.
 */

import { hmacSha256 } from "../../auth/index.ts";
import { isRecord } from "../../guards/index.ts";
import type { KubeObject } from "../../kube/index.ts";

/** The status field the seal is stored in. */
export const SEAL_FIELD = "seal";
/**
 * Status fields the seal leaves out: the health sweep writes them (resourceVersion-guarded, with
 * no pass) and a pass only projects them; a forged value there is undone by the next probes.
 */
export const UNSEALED_STATUS_FIELDS: ReadonlySet<string> = new Set([
  SEAL_FIELD,
  "health",
  "latencyMillis",
  "latencySamples",
  "lastHealthCheckTime",
]);

/** What an object's status says of its writer. */
export type SealVerdict =
  /** Sealed with the key: kubefn wrote it (or it has no status at all). */
  | "sealed"
  /** A status without a seal: written before sealing was on, or the seal was removed. */
  | "unsealed"
  /** A seal that does not verify: the status was changed by someone without the key. */
  | "foreign";

/** Seals and verifies statuses with one key (see the module comment). */
export interface StatusSeal {
  /** The seal of `status` as the status of `object` (its UID: a seal is not another object's). */
  seal(object: KubeObject, status: Record<string, unknown>): Promise<string>;
  /** Whether `object`'s stored status carries its own seal. Constant-time comparison. */
  verify(object: KubeObject): Promise<SealVerdict>;
}

const encoder = new TextEncoder();
const VERSION = "v1.";

/**
 * A {@link StatusSeal} keyed with `key` (a setting's value, or a promise of one being derived).
 *
 * @example
 * const seal = createStatusSeal(settings.statusSealKey);
 * status.seal = await seal.seal(object, status);
 * if ((await seal.verify(listed)) === "foreign") log.warn("status not written by kubefn", key);
 */
export function createStatusSeal(key: string | Promise<string>): StatusSeal {
  const imported = Promise.resolve(key).then((k) =>
    crypto.subtle.importKey("raw", encoder.encode(k), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
      "verify",
    ]),
  );
  const message = (object: KubeObject, status: Record<string, unknown>) =>
    encoder.encode(`kubefn-status-seal\n${object.metadata.uid ?? ""}\n${canonicalJson(sealedPart(status))}`);
  return {
    async seal(object, status) {
      const mac = await crypto.subtle.sign("HMAC", await imported, message(object, status));
      return VERSION + toBase64Url(new Uint8Array(mac));
    },
    async verify(object) {
      const status = object.status;
      if (!isRecord(status) || Object.keys(status).length === 0) return "sealed";
      const stored = status[SEAL_FIELD];
      if (stored === undefined) return "unsealed";
      if (typeof stored !== "string" || !stored.startsWith(VERSION)) return "foreign";
      const mac = fromBase64Url(stored.slice(VERSION.length));
      if (!mac) return "foreign";
      const ok = await crypto.subtle.verify("HMAC", await imported, mac, message(object, status));
      return ok ? "sealed" : "foreign";
    },
  };
}

/**
 * The seal of a platform's settings: keyed with `STATUS_SEAL_KEY` when set, else with a key
 * derived from the audit token or the relay secret (platform secrets kubefn's token cannot read
 * either), else none: statuses are then neither sealed nor checked.
 */
export function statusSealFrom(settings: {
  statusSealKey?: string;
  auditToken?: string;
  relaySecret?: string;
  /** False: no derived key (a platform whose passes do not read the intake's secrets). */
  deriveStatusSealKey?: boolean;
}): StatusSeal | undefined {
  if (settings.statusSealKey) return createStatusSeal(settings.statusSealKey);
  if (settings.deriveStatusSealKey === false) return undefined;
  const base = settings.auditToken ?? settings.relaySecret;
  return base === undefined ? undefined : createStatusSeal(derivedKey(base));
}

/**
 * The channel secret an unset `statusSealKey` would be derived from (`AUDIT_TOKEN`, else
 * `RELAY_SECRET`), or undefined when the key is set or none is derived. Whoever holds that secret
 * writes into an intake channel (the API server's webhook config, the relay's Pod): with a stolen
 * kubefn token as well, they could seal a status of their own. The runtime says so at start.
 */
export function derivedSealKeySource(settings: Parameters<typeof statusSealFrom>[0]): string | undefined {
  if (settings.statusSealKey || settings.deriveStatusSealKey === false) return undefined;
  if (settings.auditToken !== undefined) return "AUDIT_TOKEN";
  return settings.relaySecret !== undefined ? "RELAY_SECRET" : undefined;
}

/** A key of its own from another secret, so that a seal reveals nothing of that secret. */
async function derivedKey(secret: string): Promise<string> {
  return toBase64Url(await hmacSha256(secret, "kubefn status seal key v1"));
}

/**
 * Whether `object` has no status (absent or `{}`). kubefn never writes one: every pass writes at
 * least `observedGeneration` and the seal. So an empty status is either an object no pass has
 * reached yet, or one whose status was blanked — which would take a Ready Proxy out of crawling
 * without a trace; intake and the sweep tell the two apart and send the blanked one a pass.
 */
export function isEmptyStatus(object: KubeObject): boolean {
  const status = object.status;
  return !isRecord(status) || Object.keys(status).length === 0;
}

/** The status fields the seal covers. */
function sealedPart(status: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(status)) if (!UNSEALED_STATUS_FIELDS.has(k)) out[k] = v;
  return out;
}

/**
 * JSON with object keys sorted at every depth and undefined or null members left out: what a
 * merge patch stores (a null member deletes the field), whatever order the API server keeps.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (isRecord(value)) {
    const members = Object.keys(value)
      .filter((k) => value[k] !== undefined && value[k] !== null)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`);
    return `{${members.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function toBase64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
  const raw = atob(`${text.replaceAll("-", "+").replaceAll("_", "/")}=`);
  const out = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}
