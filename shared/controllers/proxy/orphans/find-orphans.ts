import type { KubeObject } from "../../../kube/index.ts";
import { type Instance, managedByTagKey, managedByTagValue, ownerTagKey } from "../providers/index.ts";

/** Default time an instance must exist before it may be collected as an orphan. */
export const defaultOrphanGraceSeconds = 600;

/**
 * An instance as orphan GC sees it; its `createdAt` (RFC 3339: a Pod's creationTimestamp, a GCE
 * instance's creationTimestamp) measures the grace period.
 */
export type AgedInstance = Instance;

/**
 * The instances to collect: made by kubefn (`crawl.kubefn.dev/managed-by=kubefn`), carrying an
 * owner tag (`crawl.kubefn.dev/proxy-uid`) that matches the UID of no Managed Proxy among `proxies`
 * (External never owns an instance: one left by a Managed → External switch is an orphan), not already
 * Terminating, and created at least `graceSeconds` before `now`. Pure.
 *
 * Caveats: an instance without a readable `createdAt` is of unknown age and never collected. The
 * sweep task also checks again against a list of Proxies made after the instances were listed (a
 * Proxy always exists before its instance, since the instance is named from its UID). Instances
 * lacking either tag are never returned.
 */
export function findOrphans<T extends AgedInstance>(
  instances: readonly T[],
  proxies: readonly (Pick<KubeObject, "metadata"> & { spec?: unknown })[],
  now: Date,
  graceSeconds: number = defaultOrphanGraceSeconds,
): T[] {
  const owners = new Set<string>();
  for (const p of proxies) if (p.metadata.uid && !isExternal(p)) owners.add(p.metadata.uid);
  return instances.filter((inst) => {
    if (inst.tags[managedByTagKey] !== managedByTagValue) return false;
    const owner = inst.tags[ownerTagKey];
    if (!owner || owners.has(owner)) return false;
    if (inst.state === "Terminating") return false;
    // An instance of unknown age is never collected: the grace period is what protects an
    // instance whose Proxy a concurrent pass is still creating.
    const created = inst.createdAt ? Date.parse(inst.createdAt) : Number.NaN;
    return !Number.isNaN(created) && now.getTime() - created >= graceSeconds * 1000;
  });
}

function isExternal(proxy: { spec?: unknown }): boolean {
  return (proxy.spec as { mode?: unknown } | undefined)?.mode === "External";
}
