import type { Metrics } from "../../shared/runtime/index.ts";

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
