import type { AnalyticsEngineDataset } from "@cloudflare/workers-types/index.ts";
import type { Metrics } from "../../shared/runtime/index.ts";

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
