import type { Metrics } from "../../shared/app/index.ts";

/** The per-object gauge kept, without its object, as the latest value of any object. */
const LATEST_OF_ANY = new Set(["kubefn_proxy_last_probe_timestamp_seconds"]);

/**
 * `metrics` without series that name an object (a gauge labelled `namespace` and `name`: the
 * probe gauges of every Proxy), so that `/metrics` has as many series with 10,000 Proxies as with
 * one: its cardinality is bounded by kubefn's code, not by what tenants create. The last probe's
 * time stays as one series without labels, the latest of any Proxy (the `KubefnProbesStale`
 * alert's `max()` reads it alike). `KUBEFN_METRICS_PER_PROXY=true` keeps the per-Proxy series.
 *
 * Caveats: counters and histograms are passed through as they are; none of kubefn's names an object.
 */
export function withoutObjectSeries(metrics: Metrics): Metrics {
  let latest = Number.NEGATIVE_INFINITY;
  return {
    count: (name, labels, value) => metrics.count(name, labels, value),
    observe: (name, value, labels) => metrics.observe(name, value, labels),
    gauge(name, value, labels) {
      if (labels?.namespace === undefined || labels.name === undefined) {
        metrics.gauge(name, value, labels);
        return;
      }
      if (!LATEST_OF_ANY.has(name) || value < latest) return;
      latest = value;
      const { namespace: _namespace, name: _name, ...rest } = labels;
      metrics.gauge(name, value, rest);
    },
    ...(metrics.forget ? { forget: metrics.forget.bind(metrics) } : {}),
  };
}
