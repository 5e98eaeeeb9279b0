import type { LabelRequirements } from "../../../kube/index.ts";
import {
  ConflictError,
  isAlreadyExists,
  isConflict,
  isNotFound,
  type ObjectKey,
  Resources,
} from "../../../kube/index.ts";
import type { Context } from "../../../runtime/index.ts";
import { type Proxy as ProxyObject, parseProxy, proxyResource } from "../api.ts";
import {
  freshProxyListing,
  isProxyReady,
  type ProxyEndpoint,
  type ProxyListing,
  proxyEndpoint,
  type ReadyProxy,
  selectReady,
  servedStatus,
} from "../discovery/index.ts";
import {
  canTakeOver,
  isProxyLease,
  type LeasedProxy,
  leaseExpiresAt,
  leaseNameFor,
  newLease,
  type ProxyLease,
  type ProxyState,
  proxyRefOf,
  renewed,
  takenOver,
} from "./lease.ts";

const leaseResource = Resources.Lease;
/** Attempts at a renew or release that keeps meeting Conflicts (its own holder racing itself). */
const writeAttempts = 3;

/** A lease as the API returns it. `id` is `<namespace>/<lease name>`, the renew/release path. */
export interface LeaseView {
  id: string;
  proxy: { namespace: string; name: string } & ProxyEndpoint;
  holder: string;
  expiresAt: string;
}

export interface AcquireRequest {
  namespace?: string | undefined;
  /** The namespaces the crawler may use (its credential's); default every namespace. */
  scope?: readonly string[] | "*" | undefined;
  selector?: LabelRequirements | undefined;
  holder: string;
  ttlSeconds: number;
}

export type AcquireResult = { kind: "acquired"; lease: LeaseView } | { kind: "none"; candidates: number };

export interface LeaseKey {
  namespace: string;
  /** The Lease's name (the last part of {@link LeaseView.id}). */
  name: string;
}

export type RenewResult =
  | { kind: "renewed"; lease: LeaseView }
  | { kind: "notFound" }
  | { kind: "notHolder" }
  | { kind: "proxyNotReady" };

export type ReleaseResult = { kind: "released" } | { kind: "notFound" } | { kind: "notHolder" };

/**
 * Gives `holder` one Ready proxy matching the request for `ttlSeconds`, trying the fastest first.
 * Per candidate: create its Lease (AlreadyExists → read it); a lease that `canTakeOver` allows is
 * taken with a resourceVersion-guarded update (Conflict → someone else won; next candidate).
 * The create and the guarded update are the lock: two crawlers never hold one proxy.
 *
 * Candidates come from `listing` (a fresh list when unset; the platforms share one read per few
 * seconds, see `sharedProxyListing`): it only chooses, the Lease writes above decide.
 *
 * Caveats: not idempotent — a retried request after a lost response takes a second proxy, and
 * the first stays held until its TTL runs out. One holder may hold several proxies.
 */
export async function acquireLease(
  ctx: Context,
  req: AcquireRequest,
  listing: ProxyListing = freshProxyListing(ctx),
): Promise<AcquireResult> {
  const now = ctx.clock.now();
  const proxies = await listing.inScope(req.namespace, req.scope ?? "*");
  const candidates = selectReady(proxies, { namespace: req.namespace, selector: req.selector });
  for (const candidate of candidates) {
    const lease = await tryAcquire(ctx, candidate, req.holder, req.ttlSeconds, now);
    if (lease) {
      ctx.metrics.count("kubefn_lease_acquisitions_total", { result: "acquired" });
      return { kind: "acquired", lease: leaseView(lease, candidate) };
    }
  }
  ctx.metrics.count("kubefn_lease_acquisitions_total", { result: "none" });
  return { kind: "none", candidates: candidates.length };
}

async function tryAcquire(
  ctx: Context,
  proxy: ReadyProxy,
  holder: string,
  ttlSeconds: number,
  now: Date,
): Promise<ProxyLease | undefined> {
  const key: ObjectKey = { namespace: proxy.namespace, name: leaseNameFor(proxy.name) };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      return await ctx.kube.create<ProxyLease>(leaseResource, newLease(proxy, holder, ttlSeconds, now));
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    let current: ProxyLease;
    try {
      current = await ctx.kube.get<ProxyLease>(leaseResource, key);
    } catch (err) {
      if (isNotFound(err)) continue; // released between our create and get: create again
      throw err;
    }
    // A Lease of that name that kubefn did not make for this proxy is never taken over.
    if (!isProxyLease(current)) return undefined;
    if (!canTakeOver(current, { uid: proxy.uid, ready: true }, now)) return undefined;
    try {
      return await ctx.kube.update<ProxyLease>(
        leaseResource,
        takenOver(current, proxy, holder, ttlSeconds, now),
      );
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return undefined;
      throw err;
    }
  }
  return undefined;
}

/**
 * Extends the lease by its duration (or a new `ttlSeconds`) from now, if `holder` holds it and its
 * proxy is still Ready. A proxy gone, replaced or not Ready ends the lease: it is deleted
 * (resourceVersion-guarded) and the answer is `proxyNotReady`.
 *
 * Caveats: an expired lease that nobody has taken over can still be renewed by its holder.
 */
export async function renewLease(
  ctx: Context,
  key: LeaseKey,
  holder: string,
  ttlSeconds?: number,
): Promise<RenewResult> {
  for (let attempt = 0; attempt < writeAttempts; attempt++) {
    const current = await getLease(ctx, key);
    if (!current) return { kind: "notFound" };
    if (current.spec?.holderIdentity !== holder) return { kind: "notHolder" };
    const proxy = await getLeasedProxy(ctx, current);
    if (!proxy || !isProxyReady(proxy) || proxy.metadata.uid !== proxyRefOf(current)?.uid) {
      await deleteGuarded(ctx, current);
      ctx.metrics.count("kubefn_lease_renewals_total", { result: "proxyNotReady" });
      return { kind: "proxyNotReady" };
    }
    try {
      const lease = await ctx.kube.update<ProxyLease>(
        leaseResource,
        renewed(current, ctx.clock.now(), ttlSeconds),
      );
      ctx.metrics.count("kubefn_lease_renewals_total", { result: "renewed" });
      return { kind: "renewed", lease: leaseView(lease, readyProxyOf(proxy)) };
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
  throw conflictAfterRetries(key);
}

/** Deletes the lease if `holder` holds it (resourceVersion-guarded), freeing the proxy at once. */
export async function releaseLease(ctx: Context, key: LeaseKey, holder: string): Promise<ReleaseResult> {
  for (let attempt = 0; attempt < writeAttempts; attempt++) {
    const current = await getLease(ctx, key);
    if (!current) return { kind: "notFound" };
    if (current.spec?.holderIdentity !== holder) return { kind: "notHolder" };
    try {
      await ctx.kube.delete(leaseResource, key, {
        preconditions: { uid: current.metadata.uid, resourceVersion: current.metadata.resourceVersion },
      });
      return { kind: "released" };
    } catch (err) {
      if (isNotFound(err)) return { kind: "notFound" };
      if (!isConflict(err)) throw err;
    }
  }
  throw conflictAfterRetries(key);
}

/**
 * Reads a proxy lease; undefined when it does not exist or is not one kubefn made for a proxy
 * (node heartbeats, leader election and anything else in the cluster read as absent).
 */
async function getLease(ctx: Context, key: LeaseKey): Promise<ProxyLease | undefined> {
  try {
    const lease = await ctx.kube.get<ProxyLease>(leaseResource, key);
    return isProxyLease(lease) ? lease : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * The Proxy a lease points at, read now; undefined when gone, unreadable, or its status does not
 * carry kubefn's seal (see `servedStatus`: a forged address is never handed to a crawler).
 */
export async function getLeasedProxy(ctx: Context, lease: ProxyLease): Promise<ProxyObject | undefined> {
  const ref = proxyRefOf(lease);
  if (!ref) return undefined;
  try {
    const object = await ctx.kube.get(proxyResource, { namespace: lease.metadata.namespace, name: ref.name });
    if (!(await servedStatus(ctx, object))) return undefined;
    const parsed = parseProxy(object);
    return parsed.success ? parsed.data : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** {@link ProxyState} of a proxy read by {@link getLeasedProxy}. */
export function proxyStateOf(proxy: ProxyObject | undefined): ProxyState {
  return proxy?.metadata.uid ? { uid: proxy.metadata.uid, ready: isProxyReady(proxy) } : undefined;
}

/** Deletes exactly the lease version read; true if it was deleted, false if it changed or went. */
export async function deleteGuarded(ctx: Context, lease: ProxyLease): Promise<boolean> {
  try {
    await ctx.kube.delete(
      leaseResource,
      { namespace: lease.metadata.namespace, name: lease.metadata.name },
      { preconditions: { uid: lease.metadata.uid, resourceVersion: lease.metadata.resourceVersion } },
    );
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return false;
    throw err;
  }
}

function readyProxyOf(proxy: ProxyObject): LeasedProxy & ProxyEndpoint {
  const endpoint = proxyEndpoint(proxy);
  if (!endpoint) throw new Error("readyProxyOf: the proxy has no address");
  return {
    namespace: proxy.metadata.namespace ?? "",
    name: proxy.metadata.name ?? "",
    uid: proxy.metadata.uid ?? "",
    ...endpoint,
  };
}

function leaseView(lease: ProxyLease, proxy: LeasedProxy & ProxyEndpoint): LeaseView {
  return {
    id: `${lease.metadata.namespace}/${lease.metadata.name}`,
    proxy: {
      namespace: proxy.namespace,
      name: proxy.name,
      ip: proxy.ip,
      port: proxy.port,
      scheme: proxy.scheme,
    },
    holder: lease.spec?.holderIdentity ?? "",
    expiresAt: (leaseExpiresAt(lease) ?? new Date(0)).toISOString(),
  };
}

/** A Conflict the caller may retry (the API answers 503 with Retry-After). */
function conflictAfterRetries(key: LeaseKey): ConflictError {
  return new ConflictError(
    `lease ${key.namespace}/${key.name}: still conflicting after ${writeAttempts} attempts`,
    {
      status: 409,
      reason: "Conflict",
    },
  );
}
