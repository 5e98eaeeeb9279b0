import type { Metrics } from "../../runtime/index.ts";
import { type Family, families, LATENCY_BUCKETS } from "./families.ts";

type Labels = Readonly<Record<string, string>>;

interface Series<T> {
  labels: Labels;
  value: T;
}

interface Histogram {
  bounds: readonly number[];
  /** Observations per bucket, not cumulative (the render adds them up); the last is +Inf's own. */
  counts: number[];
  sum: number;
  count: number;
}

const needsEscape = /[\\"\n]/;

function escapeValue(v: string): string {
  return needsEscape.test(v) ? v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") : v;
}

/** `a="1",b="2"`: the labels sorted by name, so one label set is one series whatever the key order. */
function labelKey(labels: Labels | undefined): string {
  if (!labels) return "";
  const keys = Object.keys(labels);
  if (keys.length > 1) keys.sort();
  let key = "";
  for (const k of keys) key += `${key ? "," : ""}${k}="${escapeValue(String(labels[k]))}"`;
  return key;
}

const brace = (key: string, extra = "") => {
  const all = key && extra ? `${key},${extra}` : key || extra;
  return all ? `{${all}}` : "";
};

/** Prometheus' text for a sample value: integers as they are, +Inf/-Inf/NaN spelled its way. */
const sample = (v: number) =>
  Number.isFinite(v) ? String(v) : Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";

/**
 * Metrics kept in process memory and rendered in the Prometheus text format (0.0.4) for the Node
 * host's `/metrics`: each family with the HELP, TYPE and buckets {@link families} gives it, counters
 * ending in `_total`.
 *
 * Cost: a count, gauge or observation is one label-key string and one map lookup (the bucket found
 * by a scan that stops at the first bound ≥ the value); the render walks every series.
 *
 * @example
 * const metrics = new PrometheusMetrics();
 * metrics.count("kubefn_passes_total", { controller: "widget", result: "done" });
 * const body = metrics.render();
 */
export class PrometheusMetrics implements Metrics {
  readonly #counters = new Map<string, Map<string, Series<number>>>();
  readonly #gauges = new Map<string, Map<string, Series<number>>>();
  readonly #histograms = new Map<string, Map<string, Series<Histogram>>>();

  count(name: string, labels?: Labels, value = 1): void {
    const series = this.#series(this.#counters, name);
    const key = labelKey(labels);
    const s = series.get(key);
    if (s) s.value += value;
    else series.set(key, { labels: { ...labels }, value });
  }

  gauge(name: string, value: number, labels?: Labels): void {
    this.#set(this.#gauges, name, value, labels);
  }

  /**
   * Sets a counter to a total kept elsewhere (a guard's counts, the process' CPU time), read at
   * scrape time.
   */
  setTotal(name: string, value: number, labels?: Labels): void {
    this.#set(this.#counters, name, value, labels);
  }

  observe(name: string, value: number, labels?: Labels): void {
    const series = this.#series(this.#histograms, name);
    const key = labelKey(labels);
    let s = series.get(key);
    if (!s) {
      const bounds = families[name]?.buckets ?? LATENCY_BUCKETS;
      s = {
        labels: { ...labels },
        value: { bounds, counts: new Array(bounds.length + 1).fill(0), sum: 0, count: 0 },
      };
      series.set(key, s);
    }
    const h = s.value;
    let i = 0;
    while (i < h.bounds.length && value > h.bounds[i]!) i++;
    h.counts[i]!++;
    h.sum += value;
    h.count++;
  }

  forget(name: string, which: Labels | ((labels: Labels) => boolean)): void {
    for (const map of [this.#counters, this.#gauges, this.#histograms] as Map<
      string,
      Map<string, Series<unknown>>
    >[]) {
      const series = map.get(name);
      if (!series) continue;
      if (typeof which === "function") {
        for (const [key, s] of series) if (which(s.labels)) series.delete(key);
      } else {
        series.delete(labelKey(which));
      }
    }
  }

  /** Current value of a counter or gauge series, for tests and the status line. */
  value(name: string, labels?: Labels): number {
    const key = labelKey(labels);
    return this.#counters.get(name)?.get(key)?.value ?? this.#gauges.get(name)?.get(key)?.value ?? 0;
  }

  render(): string {
    const out: string[] = [];
    const head = (name: string, type: Family["type"]) => {
      const help = families[name]?.help ?? `kubefn metric ${name}.`;
      out.push(
        `# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`,
        `# TYPE ${name} ${type}`,
      );
    };
    for (const [type, map] of [
      ["counter", this.#counters],
      ["gauge", this.#gauges],
    ] as const) {
      for (const [name, series] of map) {
        if (series.size === 0) continue;
        head(name, type);
        for (const [k, s] of series) out.push(`${name}${brace(k)} ${sample(s.value)}`);
      }
    }
    for (const [name, series] of this.#histograms) {
      if (series.size === 0) continue;
      head(name, "histogram");
      for (const [k, { value: h }] of series) {
        let cumulative = 0;
        h.bounds.forEach((le, i) => {
          cumulative += h.counts[i]!;
          out.push(`${name}_bucket${brace(k, `le="${le}"`)} ${cumulative}`);
        });
        out.push(`${name}_bucket${brace(k, 'le="+Inf"')} ${h.count}`);
        out.push(`${name}_sum${brace(k)} ${sample(h.sum)}`);
        out.push(`${name}_count${brace(k)} ${h.count}`);
      }
    }
    return `${out.join("\n")}\n`;
  }

  #set(map: Map<string, Map<string, Series<number>>>, name: string, value: number, labels?: Labels): void {
    const series = this.#series(map, name);
    const key = labelKey(labels);
    const s = series.get(key);
    if (s) s.value = value;
    else series.set(key, { labels: { ...labels }, value });
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
