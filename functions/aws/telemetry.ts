import type { Log, Metrics } from "../../shared/runtime/types.ts";

/** One JSON object per line on stdout/stderr, which CloudWatch Logs Insights queries by field. */
export function createJsonLog(): Log {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) =>
    (level === "error" ? console.error : console.log)(JSON.stringify({ level, msg, ...fields }));
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/**
 * Metrics as CloudWatch Embedded Metric Format log lines (namespace `kubefn`, the labels as
 * dimensions): CloudWatch extracts them from the function's log group, no API calls.
 *
 * Caveats: one log line per data point; fine at a pass's handful of counters.
 */
export function createEmfMetrics(write: (line: string) => void = console.log): Metrics {
  const emit = (name: string, value: number, unit: string, labels: Record<string, string> = {}) =>
    write(
      JSON.stringify({
        _aws: {
          Timestamp: Date.now(),
          CloudWatchMetrics: [
            { Namespace: "kubefn", Dimensions: [Object.keys(labels)], Metrics: [{ Name: name, Unit: unit }] },
          ],
        },
        ...labels,
        [name]: value,
      }),
    );
  return {
    count: (name, labels, value = 1) => emit(name, value, "Count", labels),
    observe: (name, value, labels) => emit(name, value, "None", labels),
    gauge: (name, value, labels) => emit(name, value, "None", labels),
  };
}
