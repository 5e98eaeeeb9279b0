import type { MetricFamilies } from "../operator.ts";

/**
 * The proxy operator's metric families: its health probes, the crawler API's leases and the
 * orphan collector. The Node host's `/metrics` renders them beside the runtime's.
 */
export const proxyMetricFamilies: MetricFamilies = {
  // Proxies and their health.
  kubefn_proxies: { type: "gauge", help: "Proxies by status.phase, as the last sweep listed them." },
  kubefn_probes_total: { type: "counter", help: "Health probes run." },
  kubefn_probe_duration_seconds: {
    type: "histogram",
    help: "Duration of a health probe, by whether it succeeded.",
  },
  kubefn_probe_shards_total: { type: "counter", help: "Probe shards the sweep sent." },
  kubefn_probes_shed_total: {
    type: "counter",
    help: "Proxies a late probe shard left to their next shard, nearer than this one was due.",
  },
  kubefn_health_patch_errors_total: { type: "counter", help: "Health annotation writes that failed." },
  kubefn_health_reports_lost_total: {
    type: "counter",
    help: "Health reports whose pass the queue refused: their markers were stored back, so the next probe retries.",
  },
  kubefn_proxy_last_probe_timestamp_seconds: {
    type: "gauge",
    help: "Unix time of the Proxy's last health probe (removed with the Proxy).",
    objectLabels: ["namespace", "name"],
    latestOfAny: true,
  },
  kubefn_proxy_probe_success: {
    type: "gauge",
    help: "Whether the Proxy's last health probe succeeded (1) or not (0) (removed with the Proxy).",
    objectLabels: ["namespace", "name"],
  },
  // The orphan collector.
  kubefn_orphans_collected_total: { type: "counter", help: "Provider instances no Proxy owns, deleted." },
  kubefn_orphan_sweep_errors_total: {
    type: "counter",
    help: "Orphan collection failures, by provider and stage.",
  },
  // The crawler API.
  kubefn_crawler_unsealed_proxies_total: {
    type: "counter",
    help: "Proxies the crawler API left out because their status does not carry kubefn's seal, by verdict (unsealed, foreign).",
  },
  kubefn_leases_held: { type: "gauge", help: "Proxy leases held, as the last sweep counted them." },
  kubefn_leases_deleted_total: { type: "counter", help: "Proxy leases deleted, by reason." },
  kubefn_lease_acquisitions_total: {
    type: "counter",
    help: "Lease acquisitions, by result (acquired, none).",
  },
  kubefn_lease_renewals_total: { type: "counter", help: "Lease renewals, by result." },
};
