import { type AnyOperator, type MetricFamily, operators } from "../../controllers/index.ts";

/**
 * What a metric family is, for `# HELP` / `# TYPE` and a histogram's buckets (default
 * {@link LATENCY_BUCKETS}), and the labels that name one object.
 */
export type Family = MetricFamily;

/** kubefn's own latency histograms (probes, passes). */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** controller-runtime's `controller_runtime_reconcile_time_seconds` buckets, so its dashboards read ours. */
export const RECONCILE_TIME_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
] as const;

/** controller-runtime's workqueue histograms: `ExponentialBuckets(10e-9, 10, 12)`, 10 ns to 1,000 s. */
export const WORKQUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000] as const;

/**
 * The families of the runtime, the app and the platforms (every operator's are its own,
 * `metricFamilies` of its declaration).
 * The `controller_runtime_*` and `workqueue_*` families have controller-runtime's names, labels and
 * buckets, so dashboards made for controller-runtime operators chart kubefn too.
 */
const runtimeFamilies: Readonly<Record<string, Family>> = {
  // controller-runtime's reconcile families, counted by the pass executor on every platform.
  controller_runtime_reconcile_total: {
    type: "counter",
    help: "Total number of reconciliations per controller, by result (success, error, requeue, requeue_after).",
  },
  controller_runtime_reconcile_errors_total: {
    type: "counter",
    help: "Total number of reconciliation errors per controller.",
  },
  controller_runtime_reconcile_time_seconds: {
    type: "histogram",
    help: "Length of time per reconciliation per controller.",
    buckets: RECONCILE_TIME_BUCKETS,
  },
  // client-go's workqueue families (the Node host's in-process queue; `name` is the controller).
  workqueue_depth: { type: "gauge", help: "Current depth of workqueue." },
  workqueue_adds_total: { type: "counter", help: "Total number of adds handled by workqueue." },
  workqueue_queue_duration_seconds: {
    type: "histogram",
    help: "How long in seconds an item stays in workqueue before being requested.",
    buckets: WORKQUEUE_BUCKETS,
  },
  workqueue_work_duration_seconds: {
    type: "histogram",
    help: "How long in seconds processing an item from workqueue takes.",
    buckets: WORKQUEUE_BUCKETS,
  },
  // Passes.
  kubefn_passes_total: {
    type: "counter",
    help: "Passes run (reconciles and probe shards), by controller and result (done, awaitSweep, requeue, error, latched).",
  },
  kubefn_pass_triggers_total: {
    type: "counter",
    help: "Passes run, by what brought them (trigger kind and reason).",
  },
  kubefn_pass_duration_seconds: {
    type: "histogram",
    help: "Duration of a pass, including its status write.",
  },
  kubefn_pass_errors_total: { type: "counter", help: "Failed passes, by controller and error class." },
  kubefn_shard_errors_total: { type: "counter", help: "Probe shards whose handler failed." },
  kubefn_jobs_total: { type: "counter", help: "Jobs (probe shards) run, by controller, task and result." },
  kubefn_messages_dropped_total: {
    type: "counter",
    help: "Queue messages acknowledged and dropped, by reason: not a kubefn message (invalid), a job whose objects do not carry kubefn's MAC (unauthenticated), or another cluster's message (other-cluster).",
  },
  kubefn_dead_letters_total: {
    type: "counter",
    help: "Messages the platform gave up on and kubefn read from its dead-letter queue (Workers' kubefn-dlq), by controller (unknown when the message names none registered) and kind (pass, job, newer, invalid).",
  },
  kubefn_empty_status_total: {
    type: "counter",
    help: "Primaries the sweep found with an empty status long after their creation (blanked by someone), by controller; each is sent a pass.",
  },
  kubefn_message_bodies_stripped_total: {
    type: "counter",
    help: "Queue messages whose listed objects did not carry kubefn's MAC: their pass read the objects itself.",
  },
  kubefn_messages_retried_total: {
    type: "counter",
    help: "Queue messages left for redelivery, by reason: crashed (a pass, or its delivery before it ran), newer-release, defer-failed (held back by the admission gate, not put back).",
  },
  kubefn_messages_redelivered_total: {
    type: "counter",
    help: "Queue messages delivered again because their last delivery was not acked: a retry verdict, or an invocation that failed or was cancelled before giving one.",
  },
  kubefn_state_changes_total: {
    type: "counter",
    help: "State changes delivered to the platform's sink (EventBridge, a bound Queue, a CloudEvents URL), by type.",
  },
  kubefn_state_changes_dropped_total: {
    type: "counter",
    help: "State changes not delivered, by reason: bound (over STATE_CHANGES_PER_INVOCATION), failed (the sink refused).",
  },
  kubefn_event_errors_total: { type: "counter", help: "Kubernetes Events that could not be recorded." },
  kubefn_stale_messages_total: {
    type: "counter",
    help: "Messages dropped because they were for an earlier object of the same name (another UID).",
  },
  kubefn_foreign_status_total: {
    type: "counter",
    help: "Passes that found a status kubefn did not seal (written with its identity outside kubefn) and rewrote it.",
  },
  kubefn_followup_errors_total: { type: "counter", help: "Follow-up messages that could not be sent." },
  kubefn_mapper_errors_total: { type: "counter", help: "Watch mappers that threw while mapping an event." },
  // Sweep.
  kubefn_sweep_requests_total: {
    type: "counter",
    help: "Pass requests the sweep sent, by controller and trigger.",
  },
  kubefn_sweep_errors_total: { type: "counter", help: "Sweep failures, by controller and stage." },
  kubefn_sweep_lists_unavailable_total: {
    type: "counter",
    help: "Drift lists that could not be read (the kind is not served or not allowed).",
  },
  kubefn_sweep_held_back_total: {
    type: "counter",
    help: "Sweeps skipped because the API server was failing (the circuit was open) or kubefn's admission policies were not installed and bound.",
  },
  // The admission gate (shared/app/admission): kubefn reconciles only inside its containment.
  kubefn_admission_policies_ready: {
    type: "gauge",
    help: "Whether kubefn's admission policies and bindings were installed and bound at the last check (1), or not (0: kubefn does not reconcile).",
  },
  kubefn_messages_deferred_total: {
    type: "counter",
    help: "Passes and jobs put back on the queue without running, by reason (AdmissionPoliciesNotReady).",
  },
  kubefn_sweep_last_success_timestamp_seconds: {
    type: "gauge",
    help: "Unix time of the last sweep that listed every object of the controller.",
  },
  kubefn_sweep_lease_total: {
    type: "counter",
    help: "Node-host replicas' looks at the sweep Lease, by result: held (this replica sweeps), standby or error.",
  },
  // Intake.
  kubefn_intake_batches_total: { type: "counter", help: "Event batches accepted, by source." },
  kubefn_intake_requests_total: {
    type: "counter",
    help: "Pass requests mapped from accepted batches, by source.",
  },
  kubefn_intake_rejected_total: { type: "counter", help: "Batches refused, by reason." },
  kubefn_intake_acknowledged_total: {
    type: "counter",
    help: "Pushed messages acknowledged without a pass (not an audit event kubefn reads), by source and reason.",
  },
  kubefn_intake_errors_total: { type: "counter", help: "Accepted batches whose passes could not be queued." },
  // The Node host's queue and API guard, read at scrape time.
  kubefn_queue_ready: { type: "gauge", help: "Messages waiting for a pass slot in the host's queue." },
  kubefn_queue_running: { type: "gauge", help: "Passes running in the host." },
  kubefn_queue_delayed: {
    type: "gauge",
    help: "Delayed messages (follow-ups, probe shards) held by the host.",
  },
  kubefn_api_circuit_open: {
    type: "gauge",
    help: "Whether the API circuit is open or half-open (1) or closed (0).",
  },
  kubefn_api_circuit_opened_total: { type: "counter", help: "Times the API circuit opened." },
  kubefn_api_credential_refused: {
    type: "gauge",
    help: "Whether the cluster's API server answered kubefn's last request 401 Unauthorized (1): a revoked or expired credential (Node host).",
  },
  kubefn_cluster_api_clusters: {
    type: "gauge",
    help: "Clusters discovered from Cluster API Cluster objects, by state (reconciled, waiting, refused) (Node host).",
  },
  kubefn_api_requests_held_back_total: {
    type: "counter",
    help: "API requests not sent while the circuit was open.",
  },
  kubefn_api_requests_over_budget_total: {
    type: "counter",
    help: "API requests refused because their invocation spent its request budget.",
  },
  kubefn_api_requests_retried_total: { type: "counter", help: "API requests retried after a failure." },
  // The process (the Node host).
  process_cpu_seconds_total: { type: "counter", help: "Total user and system CPU time spent in seconds." },
  process_resident_memory_bytes: { type: "gauge", help: "Resident memory size in bytes." },
  process_start_time_seconds: {
    type: "gauge",
    help: "Start time of the process since unix epoch in seconds.",
  },
  nodejs_heap_size_total_bytes: { type: "gauge", help: "Process heap size from Node.js in bytes." },
  nodejs_heap_size_used_bytes: { type: "gauge", help: "Process heap size used from Node.js in bytes." },
  nodejs_external_memory_bytes: { type: "gauge", help: "Node.js external memory size in bytes." },
};

/** The runtime's families and every operator's of `list`, by name. */
export function familiesOf(list: readonly AnyOperator[]): Readonly<Record<string, Family>> {
  return Object.assign({}, runtimeFamilies, ...list.map((o) => o.metricFamilies ?? {}));
}

/**
 * Every family kubefn emits, on every platform, by name: the runtime's and each operator's. The
 * Node host's `/metrics` renders each with its HELP and TYPE; a unit test checks this table
 * against the names the code emits.
 */
export const families = familiesOf(operators);

/**
 * The labels that name one object, by family (each family's `objectLabels`): the Node host keeps
 * such series (and forgets them with their object); a platform that bills per series or per data
 * point (Workers Analytics Engine) strips them, and drops a gauge that had them (a fleet-wide
 * "last value" means nothing). Every other label of every family takes a bounded set of values
 * (controllers, results, classes).
 */
export const objectLabels: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(families).flatMap(([name, family]) =>
    family.objectLabels ? [[name, family.objectLabels]] : [],
  ),
);
