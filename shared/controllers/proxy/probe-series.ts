import type { KubeObject, ObjectKey } from "../../kube/index.ts";
import type { Metrics } from "../../runtime/index.ts";

/** The per-Proxy gauges, labelled `namespace` and `name`, that the health task sets on every probe. */
export const proxyProbeSeries = [
  "kubefn_proxy_last_probe_timestamp_seconds",
  "kubefn_proxy_probe_success",
] as const;

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

/** Drops a Proxy's probe series (its pass found it gone). One lookup per series; no scan. */
export function forgetProxySeries(metrics: Metrics, proxy: ObjectKey): void {
  if (!metrics.forget) return;
  for (const name of proxyProbeSeries)
    metrics.forget(name, { namespace: proxy.namespace ?? "", name: proxy.name });
}

/**
 * Collects the Proxies a sweep listed and, once the listing is complete, drops the probe series of
 * every other one: a Proxy whose deletion brought no pass (an event lost) loses its series at the
 * next sweep. Collects nothing where metrics keep no series ({@link Metrics.forget} absent).
 */
export function listedProxySeries(metrics: Metrics): {
  page(proxies: readonly KubeObject[]): void;
  finish(): void;
} {
  const listed = metrics.forget ? new Set<string>() : undefined;
  return {
    page(proxies) {
      if (listed)
        for (const p of proxies) listed.add(keyOf(p.metadata.namespace ?? "", p.metadata.name ?? ""));
    },
    finish() {
      if (!listed) return;
      // A series naming no Proxy (a host's latest of any) is no Proxy's to drop.
      for (const name of proxyProbeSeries)
        metrics.forget?.(name, (l) => l.name !== undefined && !listed.has(keyOf(l.namespace ?? "", l.name)));
    },
  };
}
