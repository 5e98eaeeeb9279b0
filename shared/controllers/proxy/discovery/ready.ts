import { type LabelRequirements, matchesRequirements } from "../../../kube/index.ts";
import { type Proxy as ProxyObject, ProxyPhase } from "../api.ts";
import { managedProxyPort } from "../health-subject.ts";

/** Scheme a Managed proxy without `spec.endpoint` speaks: a plain forward proxy. */
export const defaultManagedScheme = "http";
/** Port a Managed proxy without `spec.endpoint` listens on (what the providers start). */
export const defaultManagedPort = managedProxyPort;

/** Where a crawler sends its requests to use a proxy. */
export interface ProxyEndpoint {
  ip: string;
  port: number;
  scheme: "http" | "https";
}

/** A Ready proxy as crawlers see it. `latencyMillis` is null until a probe has reported. */
export interface ReadyProxy extends ProxyEndpoint {
  namespace: string;
  name: string;
  uid: string;
  latencyMillis: number | null;
  labels: Record<string, string>;
}

export interface ReadyFilter {
  /** Only this namespace; every namespace when unset. */
  namespace?: string | undefined;
  /** Parsed with `parseLabelSelector`; every proxy when unset. */
  selector?: LabelRequirements | undefined;
}

/**
 * The endpoint of a proxy: the address is `status.ip` (the instance address for Managed,
 * `spec.endpoint.host` for External); port and scheme come from `spec.endpoint` when set, else
 * {@link defaultManagedPort}/{@link defaultManagedScheme} (3128, http).
 */
export function proxyEndpoint(proxy: Pick<ProxyObject, "spec" | "status">): ProxyEndpoint | undefined {
  const ip = proxy.status?.ip;
  if (!ip) return undefined;
  const endpoint = proxy.spec.endpoint;
  return {
    ip,
    port: endpoint?.port ?? defaultManagedPort,
    scheme: endpoint?.scheme ?? defaultManagedScheme,
  };
}

/**
 * Whether crawlers may use the proxy: phase Ready, an address, not being deleted, and a health
 * check — Ready without one means "provisioned", not "a probe passed", and crawlers are only ever
 * handed proxies that answered a probe. Lease acquisition and renewal use the same rule.
 */
export function isProxyReady(proxy: Pick<ProxyObject, "metadata" | "spec" | "status">): boolean {
  return (
    proxy.spec.healthCheck !== undefined &&
    proxy.status?.phase === ProxyPhase.Ready &&
    !proxy.metadata.deletionTimestamp &&
    proxyEndpoint(proxy) !== undefined
  );
}

/**
 * The Ready proxies matching `filter`, fastest first: ordered by `status.latencyMillis`
 * ascending, proxies without a latency last, ties by namespace and name. Pure.
 *
 * @example
 * selectReady(proxies, { namespace: "crawl", selector: parsed.requirements })[0] // the fastest
 */
export function selectReady(proxies: readonly ProxyObject[], filter: ReadyFilter = {}): ReadyProxy[] {
  const ready: ReadyProxy[] = [];
  for (const proxy of proxies) {
    const { namespace, name, uid, labels } = proxy.metadata;
    if (!namespace || !name || !uid) continue;
    if (filter.namespace !== undefined && namespace !== filter.namespace) continue;
    if (filter.selector && !matchesRequirements(labels, filter.selector)) continue;
    const endpoint = proxyEndpoint(proxy);
    if (!endpoint || !isProxyReady(proxy)) continue;
    ready.push({
      namespace,
      name,
      uid,
      ...endpoint,
      latencyMillis: proxy.status?.latencyMillis ?? null,
      labels: { ...labels },
    });
  }
  return ready.sort(byLatencyThenKey);
}

function byLatencyThenKey(a: ReadyProxy, b: ReadyProxy): number {
  const la = a.latencyMillis ?? Number.POSITIVE_INFINITY;
  const lb = b.latencyMillis ?? Number.POSITIVE_INFINITY;
  if (la !== lb) return la < lb ? -1 : 1;
  const ka = `${a.namespace}/${a.name}`;
  const kb = `${b.namespace}/${b.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
