import type { PrometheusMetrics } from "../../shared/app/index.ts";

/** Unix time the process started, seconds (fixed at load: uptime counts from the process' start). */
const startTimeSeconds = Math.round((Date.now() / 1000 - process.uptime()) * 1000) / 1000;

/**
 * The process families Prometheus client libraries export (`process_cpu_seconds_total`,
 * `process_resident_memory_bytes`, `process_start_time_seconds`, `nodejs_heap_size_*_bytes`,
 * `nodejs_external_memory_bytes`), read from `process.cpuUsage()` and `process.memoryUsage()` at
 * scrape time: nothing runs between scrapes.
 */
export function recordProcessMetrics(metrics: PrometheusMetrics): void {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  metrics.setTotal("process_cpu_seconds_total", (cpu.user + cpu.system) / 1e6);
  metrics.gauge("process_resident_memory_bytes", memory.rss);
  metrics.gauge("process_start_time_seconds", startTimeSeconds);
  metrics.gauge("nodejs_heap_size_total_bytes", memory.heapTotal);
  metrics.gauge("nodejs_heap_size_used_bytes", memory.heapUsed);
  metrics.gauge("nodejs_external_memory_bytes", memory.external);
}
