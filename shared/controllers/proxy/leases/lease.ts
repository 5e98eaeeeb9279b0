import type { KubeObject, ObjectMeta, OwnerReference } from "../../../kube/index.ts";
import { fnv1a32, formatMicroTime } from "../../../kube/index.ts";
import { proxyGroup, proxyVersion } from "../api.ts";

/** Label on every proxy Lease: the Proxy's name (hashed when longer than a label value allows). */
export const leaseProxyLabel = "crawl.kubefn.dev/proxy";
/** Label marking a Lease as made by kubefn (the admission policy lets kubefn write only these). */
export const leaseManagedByLabel = "crawl.kubefn.dev/managed-by";
export const leaseManagedByValue = "kubefn";
/** The label selector of every proxy Lease kubefn made. */
export const proxyLeaseSelector = `${leaseManagedByLabel}=${leaseManagedByValue},${leaseProxyLabel}`;
/** Lease names are `proxy-<proxy name>`. */
export const leaseNamePrefix = "proxy-";
/** The TTL bounds a crawler may ask for. */
export const minLeaseSeconds = 5;
export const maxLeaseSeconds = 3600;

/** A coordination.k8s.io/v1 Lease, with the fields kubefn reads and writes. */
export interface ProxyLease extends KubeObject {
  apiVersion: "coordination.k8s.io/v1";
  kind: "Lease";
  metadata: ObjectMeta & { name: string; namespace: string };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    /** MicroTime: `2006-01-02T15:04:05.000000Z`. */
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** The Proxy a lease is for, as the lease code needs it. */
export interface LeasedProxy {
  namespace: string;
  name: string;
  uid: string;
}

/**
 * What the lease code knows about a lease's proxy: gone (`undefined`), or its UID and whether it
 * is Ready (see `isProxyReady`).
 */
export type ProxyState = { uid: string; ready: boolean } | undefined;

const subdomainMax = 253;
const labelValueMax = 63;
const hashChars = 8;

/** A short deterministic suffix for names that must be cut: FNV-1a, 8 hex digits. */
function fnv1a(text: string): string {
  return fnv1a32(text).toString(16).padStart(hashChars, "0");
}

/** `text` if it fits in `max`, else its head (trimmed to end alphanumeric) and a hash of all of it. */
function fitWithHash(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = text.slice(0, max - hashChars - 1).replace(/[^A-Za-z0-9]+$/, "");
  return `${head}-${fnv1a(text)}`;
}

/**
 * The Lease name for a Proxy: `proxy-<name>`, deterministic so that two crawlers creating it race
 * on one name. A name that would exceed 253 characters is cut and suffixed with a hash of the
 * whole name.
 *
 * @example
 * leaseNameFor("fast-1") // "proxy-fast-1"
 */
export function leaseNameFor(proxyName: string): string {
  return fitWithHash(`${leaseNamePrefix}${proxyName}`, subdomainMax);
}

/** The {@link leaseProxyLabel} value for a Proxy name (≤ 63 characters, hashed when longer). */
export function leaseLabelValueFor(proxyName: string): string {
  return fitWithHash(proxyName, labelValueMax);
}

const timeRe = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

/** Parses a MicroTime (or any RFC 3339 time) to a Date, to the millisecond; undefined if malformed. */
export function parseMicroTime(text: string | undefined): Date | undefined {
  const m = text ? timeRe.exec(text) : null;
  if (!m) return undefined;
  const millis = (m[2] ?? "").padEnd(3, "0").slice(0, 3);
  const at = new Date(`${m[1]}.${millis}${m[3]}`);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/**
 * When the lease runs out: `renewTime` (else `acquireTime`) plus `leaseDurationSeconds`.
 * Undefined for a lease without a parsable time or a duration (treated as expired).
 */
export function leaseExpiresAt(lease: Pick<ProxyLease, "spec">): Date | undefined {
  const since = parseMicroTime(lease.spec?.renewTime ?? lease.spec?.acquireTime);
  const seconds = lease.spec?.leaseDurationSeconds;
  if (!since || seconds === undefined) return undefined;
  return new Date(since.getTime() + seconds * 1000);
}

/**
 * Whether the lease has run out at `now`: expired at `renewTime + leaseDurationSeconds` exactly.
 * A lease missing its times or duration is expired.
 */
export function isExpired(lease: Pick<ProxyLease, "spec">, now: Date): boolean {
  const expires = leaseExpiresAt(lease);
  return expires === undefined || expires.getTime() <= now.getTime();
}

/** The proxy a lease names in its ownerReferences, or undefined for a lease that names none. */
export function proxyRefOf(
  lease: Pick<ProxyLease, "metadata">,
): Pick<OwnerReference, "name" | "uid"> | undefined {
  const ref = lease.metadata.ownerReferences?.find(
    (r) => r.kind === "Proxy" && r.apiVersion.startsWith(`${proxyGroup}/`),
  );
  return ref ? { name: ref.name, uid: ref.uid } : undefined;
}

/**
 * Whether kubefn made this Lease for a proxy: its managed-by and proxy labels, and an
 * ownerReference to a Proxy. The lease API and sweep touch no other Lease.
 */
export function isProxyLease(lease: Pick<ProxyLease, "metadata">): boolean {
  const labels = lease.metadata.labels ?? {};
  return (
    labels[leaseManagedByLabel] === leaseManagedByValue &&
    labels[leaseProxyLabel] !== undefined &&
    proxyRefOf(lease) !== undefined
  );
}

/** Why a held lease may be taken by another holder. */
export type TakeOverReason = "Released" | "Expired" | "ProxyGone" | "ProxyReplaced" | "ProxyNotReady";

/**
 * Whether another crawler may take the lease over, and why: nobody holds it, it expired, or its
 * proxy is gone, was replaced (same name, new UID) or is no longer Ready. Undefined when the
 * holder keeps it. Pure.
 */
export function canTakeOver(lease: ProxyLease, proxy: ProxyState, now: Date): TakeOverReason | undefined {
  if (!lease.spec?.holderIdentity) return "Released";
  if (isExpired(lease, now)) return "Expired";
  if (proxy === undefined) return "ProxyGone";
  const ref = proxyRefOf(lease);
  if (ref && ref.uid !== proxy.uid) return "ProxyReplaced";
  if (!proxy.ready) return "ProxyNotReady";
  return undefined;
}

/** What the lease sweep does with one lease. */
export type LeaseSweepDecision =
  | { action: "keep"; held: boolean }
  | { action: "delete"; reason: "ExpiredLongAgo" | "ProxyGone" | "ProxyReplaced" | "ProxyNotReady" };

/**
 * The lease sweep's rule: a lease ends when its proxy is gone, replaced or not Ready, and is
 * cleaned up once it has been expired for longer than its own duration (a briefly expired lease
 * is kept so its holder's late renewal still finds it). Pure.
 *
 * Caveats: the proxy state must be read after the lease; the sweep confirms a proxy-based delete
 * with a fresh GET so that a lease acquired after the sweep listed the proxies survives.
 */
export function leaseSweepDecision(lease: ProxyLease, proxy: ProxyState, now: Date): LeaseSweepDecision {
  const ref = proxyRefOf(lease);
  if (proxy === undefined) return { action: "delete", reason: "ProxyGone" };
  if (ref && ref.uid !== proxy.uid) return { action: "delete", reason: "ProxyReplaced" };
  if (!proxy.ready) return { action: "delete", reason: "ProxyNotReady" };
  const expires = leaseExpiresAt(lease);
  const seconds = lease.spec?.leaseDurationSeconds ?? 0;
  if (expires === undefined || expires.getTime() + seconds * 1000 < now.getTime()) {
    return { action: "delete", reason: "ExpiredLongAgo" };
  }
  return { action: "keep", held: Boolean(lease.spec?.holderIdentity) && expires.getTime() > now.getTime() };
}

/** The ownerReference from a Lease to its Proxy: plain, not `controller` (a Lease is not controlled). */
export function proxyOwnerReference(proxy: LeasedProxy): OwnerReference {
  return { apiVersion: `${proxyGroup}/${proxyVersion}`, kind: "Proxy", name: proxy.name, uid: proxy.uid };
}

/** A new Lease giving `holder` the proxy for `ttlSeconds` from `now`. Pure. */
export function newLease(proxy: LeasedProxy, holder: string, ttlSeconds: number, now: Date): ProxyLease {
  const at = formatMicroTime(now);
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: leaseNameFor(proxy.name),
      namespace: proxy.namespace,
      labels: {
        [leaseManagedByLabel]: leaseManagedByValue,
        [leaseProxyLabel]: leaseLabelValueFor(proxy.name),
      },
      ownerReferences: [proxyOwnerReference(proxy)],
    },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: ttlSeconds,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: 0,
    },
  };
}

/**
 * `current` handed to `holder`: new holder, times and duration, one more transition, the
 * ownerReference pointing at the proxy as it is now. Keeps `resourceVersion`, so the update is
 * guarded: of two crawlers taking over the same lease, one gets a Conflict. Pure.
 */
export function takenOver(
  current: ProxyLease,
  proxy: LeasedProxy,
  holder: string,
  ttlSeconds: number,
  now: Date,
): ProxyLease {
  const fresh = newLease(proxy, holder, ttlSeconds, now);
  const others = (current.metadata.ownerReferences ?? []).filter((r) => r.kind !== "Proxy");
  return {
    ...current,
    metadata: {
      ...current.metadata,
      labels: { ...current.metadata.labels, ...fresh.metadata.labels },
      ownerReferences: [...others, proxyOwnerReference(proxy)],
    },
    spec: { ...fresh.spec, leaseTransitions: (current.spec?.leaseTransitions ?? 0) + 1 },
  };
}

/** `current` renewed at `now`, optionally with a new duration. Keeps `resourceVersion`. Pure. */
export function renewed(current: ProxyLease, now: Date, ttlSeconds?: number): ProxyLease {
  return {
    ...current,
    spec: {
      ...current.spec,
      renewTime: formatMicroTime(now),
      leaseDurationSeconds: ttlSeconds ?? current.spec?.leaseDurationSeconds ?? minLeaseSeconds,
    },
  };
}
