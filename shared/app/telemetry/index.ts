export { families, objectLabels } from "./families.ts";
export { createJsonLog, createLineLog } from "./log.ts";
export { PrometheusMetrics } from "./prometheus.ts";
