import type { Metrics } from "../../shared/app/index.ts";

/** The CloudWatch namespace of kubefn's metrics on Lambda (the template's alarms read it). */
export const EMF_NAMESPACE = "kubefn";

/**
 * Labels whose values come from a small set fixed by the code or the registry (controllers,
 * results, triggers, error classes, …): the only labels that become CloudWatch dimensions. Every
 * other label — an object's `name` and `namespace` — is dropped from the dimensions,
 * because CloudWatch bills each distinct dimension-value combination as its own metric
 * (10,000 objects would be 20,000 metrics). Per-object detail belongs in the log lines.
 */
export const EMF_DIMENSIONS: ReadonlySet<string> = new Set([
  "controller",
  "result",
  "trigger",
  "reason",
  "source",
  "class",
  "stage",
  "task",
  "ok",
  "phase",
  "provider",
  "kind",
  "list",
]);

/**
 * The families written as CloudWatch metrics (each name × dimension values one custom metric,
 * billed $0.30 a month): the template's alarm (`PassesFailingAlarm` reads
 * `controller_runtime_reconcile_errors_total`), the pass rate by result, and that probing and
 * sweeps go on. Every other family is written in the same EMF line as a property without a metric
 * definition — CloudWatch Logs Insights reads it; no custom metric is billed for it.
 */
export const EMF_METRICS: ReadonlySet<string> = new Set([
  "controller_runtime_reconcile_total",
  "controller_runtime_reconcile_errors_total",
  "kubefn_probes_total",
  "kubefn_sweep_errors_total",
]);

/** The Embedded Metric Format's limits: metrics in one directive, values in one array. */
export const EMF_MAX_METRICS = 100;
export const EMF_MAX_VALUES = 100;

/** {@link Metrics} that hold the invocation's data points until {@link flush}. */
export interface EmfMetrics extends Metrics {
  /**
   * Writes what was recorded since the last flush as EMF documents (few: series whose dimension
   * values agree share one, up to 100 metrics or 100 values) and forgets it. Returns the bytes
   * written.
   */
  flush(): number;
}

interface Series {
  name: string;
  dimensions: Record<string, string>;
  unit: string;
  /** A counter's sum, a gauge's last value, or a histogram's observations. */
  value: number | number[];
}

/**
 * Metrics for Lambda as CloudWatch Embedded Metric Format, aggregated per invocation: counters
 * summed, gauges' last value. Dimensions are the {@link EMF_DIMENSIONS} among a data point's
 * labels; a counter or histogram is summed over the others; a gauge that carries any other label
 * is per object and not written at all (its log line has it). An empty label value is written
 * `none`. The Lambda handler calls {@link EmfMetrics.flush} at the end of every invocation, also
 * when it failed.
 *
 * Only the families `defines` admits ({@link EMF_METRICS} by default) are CloudWatch metrics
 * (histograms among them as EMF value arrays, from which CloudWatch derives percentiles;
 * observations to four decimals, 0.1 ms of a duration in seconds). The others are properties of
 * the invocation's first EMF document, one root member per family: its value, or an object by
 * labels (`"kubefn_intake_rejected_total": {"reason=Unauthenticated": 1}`); a histogram as
 * `{count, sum, min, max}` — a probe invocation's hundreds of latencies are then one short member,
 * not most of its log bytes.
 *
 * `write` defaults to `process.stdout.write`, one document per line: Lambda's JSON log format
 * wraps `console.log` lines in its own JSON object, where CloudWatch would no longer find the
 * EMF document; raw standard output reaches the log as it is in both formats.
 *
 * @example
 * const metrics = createEmfMetrics();
 * try { await kubefn.consume(deliveries) } finally { metrics.flush() }
 *
 * Caveats: one instance serves one invocation at a time (Lambda's model); data points of an
 * invocation that never reaches its `finally` (a timeout, a crash of the runtime) are lost.
 */
export function createEmfMetrics(
  options: {
    write?: (document: string) => void;
    now?: () => number;
    /** Whether a family is written as a CloudWatch metric; default: it is in {@link EMF_METRICS}. */
    defines?: (name: string) => boolean;
  } = {},
): EmfMetrics {
  const defines = options.defines ?? ((name: string) => EMF_METRICS.has(name));
  const write = options.write ?? ((document: string) => void process.stdout.write(`${document}\n`));
  const now = options.now ?? Date.now;
  let series = new Map<string, Series>();

  const record = (
    kind: "count" | "observe" | "gauge",
    name: string,
    measured: number,
    labels: Record<string, string> = {},
  ) => {
    // An observation is written to 0.1 ms (of seconds): a probe's latency as 0.0031, not
    // 0.0031234567 — the EMF lines of an invocation's hundreds of probes are most of its log bytes.
    const value = kind === "observe" ? Math.round(measured * 10_000) / 10_000 : measured;
    const dimensions: Record<string, string> = {};
    let perObject = false;
    for (const key of Object.keys(labels).sort()) {
      // CloudWatch refuses an empty dimension value (and with it the whole document).
      if (EMF_DIMENSIONS.has(key)) dimensions[key] = labels[key] || "none";
      else perObject = true;
    }
    if (kind === "gauge" && perObject) return;
    const key = `${name}\u0000${JSON.stringify(dimensions)}`;
    const held = series.get(key);
    if (!held) {
      series.set(key, {
        name,
        dimensions,
        unit: unitOf(name, kind),
        value: kind === "observe" ? [value] : value,
      });
    } else if (Array.isArray(held.value)) held.value.push(value);
    else held.value = kind === "count" ? held.value + value : value;
  };

  return {
    count: (name, labels, value = 1) => record("count", name, value, labels),
    observe: (name, value, labels) => record("observe", name, value, labels),
    gauge: (name, value, labels) => record("gauge", name, value, labels),
    flush() {
      const held = series;
      series = new Map();
      let bytes = 0;
      const defined: Series[] = [];
      const properties: Series[] = [];
      for (const s of held.values()) (defines(s.name) ? defined : properties).push(s);
      const documents = emfDocuments(defined, now());
      if (properties.length > 0) {
        if (documents.length === 0) documents.push({ _aws: { Timestamp: now(), CloudWatchMetrics: [] } });
        Object.assign(documents[0]!, propertiesOf(properties));
      }
      for (const document of documents) {
        const line = JSON.stringify(document);
        bytes += Buffer.byteLength(line) + 1;
        write(line);
      }
      return bytes;
    },
  };
}

/**
 * The families not defined as metrics, as EMF properties: one root member per family, its value
 * or an object keyed by its labels (`key=value` sorted, joined by `,`); a histogram summarised.
 */
function propertiesOf(series: readonly Series[]): Record<string, unknown> {
  const byFamily = new Map<string, Series[]>();
  for (const s of series) byFamily.set(s.name, [...(byFamily.get(s.name) ?? []), s]);
  const out: Record<string, unknown> = {};
  for (const [name, family] of byFamily) {
    const written = (s: Series) => (Array.isArray(s.value) ? summary(s.value) : s.value);
    const only = family[0]!;
    if (family.length === 1 && Object.keys(only.dimensions).length === 0) {
      out[name] = written(only);
      continue;
    }
    out[name] = Object.fromEntries(
      family.map((s) => [
        Object.entries(s.dimensions)
          .map(([k, v]) => `${k}=${v}`)
          .join(","),
        written(s),
      ]),
    );
  }
  return out;
}

function summary(values: readonly number[]) {
  let sum = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    sum += v;
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  return { count: values.length, sum: Math.round(sum * 10_000) / 10_000, min, max };
}

/** A document being packed: shared root members, one directive per dimension set. */
interface Packing {
  root: Record<string, string>;
  directives: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[];
  values: Record<string, number | number[]>;
  metrics: number;
}

/**
 * The EMF documents for `series`. Series with the same dimension values form a piece (at most
 * 100 metrics; a histogram of more than 100 observations continues in a later piece); pieces
 * whose dimension values agree share a document, each with its own directive, up to 100 metrics
 * a document — a pass's families (by result, by trigger, by controller) fit in one or two.
 */
function emfDocuments(series: readonly Series[], timestamp: number): Record<string, unknown>[] {
  const byDimensions = new Map<string, Series[]>();
  for (const s of series) {
    const key = JSON.stringify(s.dimensions);
    const group = byDimensions.get(key);
    if (group) group.push(s);
    else byDimensions.set(key, [s]);
  }
  const packed: Packing[] = [];
  for (const group of byDimensions.values()) {
    const dimensions = group[0]?.dimensions ?? {};
    let rounds = 1;
    for (const s of group)
      if (Array.isArray(s.value)) rounds = Math.max(rounds, Math.ceil(s.value.length / EMF_MAX_VALUES));
    for (let round = 0; round < rounds; round++) {
      const members: { s: Series; value: number | number[] }[] = [];
      for (const s of group) {
        if (!Array.isArray(s.value)) {
          if (round === 0) members.push({ s, value: s.value });
          continue;
        }
        const chunk = s.value.slice(round * EMF_MAX_VALUES, (round + 1) * EMF_MAX_VALUES);
        if (chunk.length > 0) members.push({ s, value: chunk.length === 1 ? (chunk[0] as number) : chunk });
      }
      for (let i = 0; i < members.length; i += EMF_MAX_METRICS) {
        const piece = members.slice(i, i + EMF_MAX_METRICS);
        const fits = (p: Packing) =>
          p.metrics + piece.length <= EMF_MAX_METRICS &&
          Object.entries(dimensions).every(([k, v]) => p.root[k] === undefined || p.root[k] === v) &&
          piece.every(({ s }) => !(s.name in p.values) && !(s.name in p.root)) &&
          Object.keys(dimensions).every((k) => !(k in p.values));
        let into = packed.find(fits);
        if (!into) {
          into = { root: {}, directives: [], values: {}, metrics: 0 };
          packed.push(into);
        }
        Object.assign(into.root, dimensions);
        into.directives.push({
          Namespace: EMF_NAMESPACE,
          Dimensions: [Object.keys(dimensions)],
          Metrics: piece.map(({ s }) => ({ Name: s.name, Unit: s.unit })),
        });
        for (const { s, value } of piece) into.values[s.name] = value;
        into.metrics += piece.length;
      }
    }
  }
  return packed.map((p) => ({
    _aws: { Timestamp: timestamp, CloudWatchMetrics: p.directives },
    ...p.root,
    ...p.values,
  }));
}

function unitOf(name: string, kind: "count" | "observe" | "gauge"): string {
  if (name.endsWith("_seconds")) return "Seconds";
  if (name.endsWith("_bytes")) return "Bytes";
  return kind === "count" ? "Count" : "None";
}
