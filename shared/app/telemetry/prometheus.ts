import type { Metrics } from "../../runtime/index.ts";

type Labels = Record<string, string>;

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Histogram {
  buckets: number[];
  sum: number;
  count: number;
}

function labelKey(labels: Labels | undefined): string {
  if (!labels) return "";
  const keys = Object.keys(labels).sort();
  return keys
    .map(
      (k) => `${k}="${String(labels[k]).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`,
    )
    .join(",");
}

/**
 * Metrics kept in process memory and rendered in the Prometheus text format for `/metrics`.
 * Counters end in `_total`; `observe` feeds a histogram with latency buckets in seconds.
 */
export class PrometheusMetrics implements Metrics {
  readonly #counters = new Map<string, Map<string, number>>();
  readonly #gauges = new Map<string, Map<string, number>>();
  readonly #histograms = new Map<string, Map<string, Histogram>>();

  count(name: string, labels?: Labels, value = 1): void {
    const series = this.#series(this.#counters, name);
    const key = labelKey(labels);
    series.set(key, (series.get(key) ?? 0) + value);
  }

  gauge(name: string, value: number, labels?: Labels): void {
    this.#series(this.#gauges, name).set(labelKey(labels), value);
  }

  observe(name: string, value: number, labels?: Labels): void {
    const series = this.#series(this.#histograms, name);
    const key = labelKey(labels);
    let h = series.get(key);
    if (!h) {
      h = { buckets: LATENCY_BUCKETS.map(() => 0), sum: 0, count: 0 };
      series.set(key, h);
    }
    LATENCY_BUCKETS.forEach((le, i) => {
      if (value <= le) h.buckets[i]!++;
    });
    h.sum += value;
    h.count++;
  }

  /** Current value of a counter or gauge series, for tests and the status line. */
  value(name: string, labels?: Labels): number {
    const key = labelKey(labels);
    return this.#counters.get(name)?.get(key) ?? this.#gauges.get(name)?.get(key) ?? 0;
  }

  render(): string {
    const out: string[] = [];
    const brace = (k: string, extra = "") => {
      const all = [k, extra].filter(Boolean).join(",");
      return all ? `{${all}}` : "";
    };
    for (const [name, series] of this.#counters) {
      out.push(`# TYPE ${name} counter`);
      for (const [k, v] of series) out.push(`${name}${brace(k)} ${v}`);
    }
    for (const [name, series] of this.#gauges) {
      out.push(`# TYPE ${name} gauge`);
      for (const [k, v] of series) out.push(`${name}${brace(k)} ${v}`);
    }
    for (const [name, series] of this.#histograms) {
      out.push(`# TYPE ${name} histogram`);
      for (const [k, h] of series) {
        LATENCY_BUCKETS.forEach((le, i) => {
          out.push(`${name}_bucket${brace(k, `le="${le}"`)} ${h.buckets[i]}`);
        });
        out.push(`${name}_bucket${brace(k, 'le="+Inf"')} ${h.count}`);
        out.push(`${name}_sum${brace(k)} ${h.sum}`);
        out.push(`${name}_count${brace(k)} ${h.count}`);
      }
    }
    return `${out.join("\n")}\n`;
  }

  #series<T>(map: Map<string, Map<string, T>>, name: string): Map<string, T> {
    let s = map.get(name);
    if (!s) {
      s = new Map();
      map.set(name, s);
    }
    return s;
  }
}
