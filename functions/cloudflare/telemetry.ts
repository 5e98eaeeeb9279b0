import type { AnalyticsEngineDataPoint, AnalyticsEngineDataset } from "@cloudflare/workers-types/index.ts";
import type { Metrics } from "../../shared/app/index.ts";
import { objectLabels } from "../../shared/app/index.ts";

/** Data points Workers Analytics Engine accepts from one invocation; one more throws. */
export const MAX_POINTS_PER_INVOCATION = 250;

/** The point that stands for the series a flush left out (see {@link AggregatedMetrics.flush}). */
export const DROPPED_SERIES = "kubefn_metrics_series_dropped_total";

/** What one call of {@link AggregatedMetrics.flush} wrote. */
export interface Flushed {
  /** Data points written, the dropped-series point included; at most the cap. */
  points: number;
  /** Series left out because there were more than the cap allows (counted in one point). */
  droppedSeries: number;
}

/** {@link Metrics} that hold what they are told until {@link flush} writes it. */
export interface AggregatedMetrics extends Metrics {
  /**
   * Writes one data point per series held since the last flush and forgets them. More series
   * than `maxPoints` allows: the ones updated least often are left out, and one
   * {@link DROPPED_SERIES} point counts them (double1 series, double2 the updates they held).
   *
   * Caveats: it never throws; a dataset that refuses a point ends the flush (the rest is lost, as
   * it would be with a failed scrape).
   */
  flush(): Flushed;
}

/** One series' figures since the last flush. */
interface Series {
  name: string;
  labels: string;
  kind: "counter" | "gauge" | "histogram";
  /** Counter: the sum of increments; gauge: the last value; histogram: the sum of observations. */
  value: number;
  /** Calls: increments, sets or observations. */
  updates: number;
  min: number;
  max: number;
}

/**
 * The Worker's metrics, written to Workers Analytics Engine as one data point per series per
 * invocation: every call of `count`, `gauge` and `observe` only updates a series in memory, keyed by
 * name and labels, and the Worker flushes once when the invocation ends. A queue batch of ten
 * probe shards (400 probes, about 1,220 calls) so writes 3 points, not 1,220 over the platform's
 * 250; at most `maxPoints` in any case. Without a dataset nothing is held.
 *
 * Layout of a point (docs/monitoring.md has queries):
 * - index1, blob1: the family name (`controller_runtime_reconcile_total`, …);
 * - blob2: the labels as `key=value` pairs sorted by key and joined by `,` (`""` without labels);
 * - blob3: `counter`, `gauge` or `histogram`;
 * - double1: a counter's sum, a gauge's last value, a histogram's sum of observations;
 * - double2: updates (a histogram's count); double3, double4: the least and greatest value given.
 *
 * Labels that name an object ({@link objectLabels}: an object's name and namespace) are stripped, and a
 * gauge that carried them is not kept: a point per object per invocation is what the platform
 * bills and limits, and per-object detail is in the logs.
 *
 * Caveats: an isolate serves several invocations at once and this registry is the isolate's, so a
 * flush writes what every invocation recorded up to then; totals are exact, the split over
 * invocations is not. Nothing is taken back (`forget` is absent), and histograms have no buckets:
 * a quantile needs the Node host's `/metrics`; Analytics Engine gives the mean and the maximum.
 *
 * @example
 * const metrics = createAnalyticsMetrics(env.KUBEFN_METRICS);
 * exec.waitUntil(kubefn.sweep().finally(() => metrics.flush()));
 */
export function createAnalyticsMetrics(
  dataset: AnalyticsEngineDataset | undefined,
  maxPoints = MAX_POINTS_PER_INVOCATION,
): AggregatedMetrics {
  let held = new Map<string, Series>();
  const update = (
    kind: Series["kind"],
    name: string,
    value: number,
    labels: Record<string, string> | undefined,
  ) => {
    if (!dataset) return;
    const named = objectLabels[name];
    if (named && kind === "gauge") return;
    const pairs = labelPairs(labels, named);
    const key = `${name} ${pairs}`;
    const series = held.get(key);
    if (!series) {
      held.set(key, { name, labels: pairs, kind, value, updates: 1, min: value, max: value });
      return;
    }
    series.value = kind === "gauge" ? value : series.value + value;
    series.updates++;
    if (value < series.min) series.min = value;
    if (value > series.max) series.max = value;
  };
  return {
    count: (name, labels, value = 1) => update("counter", name, value, labels),
    gauge: (name, value, labels) => update("gauge", name, value, labels),
    observe: (name, value, labels) => update("histogram", name, value, labels),
    flush() {
      const series = [...held.values()];
      held = new Map();
      if (!dataset || series.length === 0) return { points: 0, droppedSeries: 0 };
      let dropped: Series[] = [];
      if (series.length > maxPoints) {
        series.sort((a, b) => b.updates - a.updates);
        dropped = series.splice(maxPoints - 1);
        const updates = dropped.reduce((n, s) => n + s.updates, 0);
        series.push({
          name: DROPPED_SERIES,
          labels: "",
          kind: "counter",
          value: dropped.length,
          updates,
          min: 0,
          max: 0,
        });
      }
      let points = 0;
      try {
        for (const s of series) {
          dataset.writeDataPoint(dataPoint(s));
          points++;
        }
      } catch (err) {
        console.error(
          JSON.stringify({ level: "error", msg: "metrics flush failed", points, error: String(err) }),
        );
      }
      return { points, droppedSeries: dropped.length };
    },
  };
}

/** `key=value` pairs sorted by key, without `strip`'s keys, joined by `,`. */
function labelPairs(
  labels: Record<string, string> | undefined,
  strip: readonly string[] | undefined,
): string {
  if (!labels) return "";
  const keys = Object.keys(labels);
  if (keys.length === 0) return "";
  keys.sort();
  let out = "";
  for (const k of keys) {
    if (strip?.includes(k)) continue;
    out += `${out ? "," : ""}${k}=${labels[k]}`;
  }
  return out;
}

function dataPoint(s: Series): AnalyticsEngineDataPoint {
  return {
    indexes: [s.name],
    blobs: [s.name, s.labels, s.kind],
    doubles: [s.value, s.updates, s.min, s.max],
  };
}
