import { families, type Metrics } from "../../shared/app/index.ts";

/** The per-object gauges kept, without their object, as the latest value of any object. */
const LATEST_OF_ANY = new Set(
  Object.entries(families).flatMap(([name, family]) => (family.latestOfAny ? [name] : [])),
);

/**
 * `metrics` without series that name an object (a gauge labelled `namespace` and `name`: an
 * operator's gauges of every primary), so that `/metrics` has as many series with 10,000 objects
 * as with one: its cardinality is bounded by kubefn's code, not by what tenants create. A family
 * declared `latestOfAny` stays as one series without labels, the latest of any object (the last
 * probe's time: the `KubefnProbesStale` alert's `max()` reads it alike). The Node host's
 * per-object metrics setting keeps the per-object series.
 *
 * Caveats: counters and histograms are passed through as they are; none of kubefn's names an object.
 */
export function withoutObjectSeries(metrics: Metrics): Metrics {
  const latest = new Map<string, number>();
  return {
    count: (name, labels, value) => metrics.count(name, labels, value),
    observe: (name, value, labels) => metrics.observe(name, value, labels),
    gauge(name, value, labels) {
      if (labels?.namespace === undefined || labels.name === undefined) {
        metrics.gauge(name, value, labels);
        return;
      }
      if (!LATEST_OF_ANY.has(name) || value < (latest.get(name) ?? Number.NEGATIVE_INFINITY)) return;
      latest.set(name, value);
      const { namespace: _namespace, name: _name, ...rest } = labels;
      metrics.gauge(name, value, rest);
    },
    ...(metrics.forget ? { forget: metrics.forget.bind(metrics) } : {}),
  };
}
