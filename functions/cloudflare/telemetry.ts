import type { AnalyticsEngineDataset } from "@cloudflare/workers-types/index.ts";
import type { Log, Metrics } from "../../shared/runtime/types.ts";

/** One JSON object per line on the console, which Workers Logs index by field. */
export function createConsoleLog(): Log {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) =>
    (level === "error" ? console.error : console.log)(JSON.stringify({ level, msg, ...fields }));
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/**
 * Metrics as Analytics Engine data points (blob1 = name, blob2 = labels as JSON, double1 =
 * value); a no-op without the binding. Query them with the Analytics Engine SQL API.
 */
export function createMetrics(dataset: AnalyticsEngineDataset | undefined): Metrics {
  const write = (name: string, value: number, labels?: Record<string, string>) =>
    dataset?.writeDataPoint({
      indexes: [name],
      blobs: [name, JSON.stringify(labels ?? {})],
      doubles: [value],
    });
  return {
    count: (name, labels, value = 1) => write(name, value, labels),
    observe: (name, value, labels) => write(name, value, labels),
    gauge: (name, value, labels) => write(name, value, labels),
  };
}
