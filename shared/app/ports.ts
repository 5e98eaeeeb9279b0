import type { OperatorOptions } from "../controllers/index.ts";
import type { Prober } from "../health/index.ts";
import type {
  Clock,
  Kube,
  Log,
  Metrics,
  PassResult,
  Queue,
  Spans,
  StateChangeSink,
  SweepSummary,
} from "../runtime/index.ts";
import type { FleetGroup, FleetPageOptions } from "./fleet/index.ts";
import type { CloudWatchLogsResult, IntakeCredentials } from "./intake/index.ts";

/** The operator options a platform may add (see {@link KubefnPorts.operatorOptions}). */
export type PlatformOperatorOptions = Partial<
  Omit<OperatorOptions, "settings" | "prober" | "sweepPeriodSeconds">
>;

/** What a platform binds: the outside world, as the core's ports. */
export interface KubefnPorts {
  /**
   * The cluster `kube` reaches (a declared cluster's name, `KUBEFN_CLUSTERS`): every message this
   * kubefn sends names it, and a delivered message naming another is dropped, never run against
   * `kube`. `default` when unset.
   */
  cluster?: string;
  kube: Kube;
  /**
   * A Kube for one platform invocation ({@link Kubefn.invocation}: a queue batch, a Lambda event,
   * a sweep, a Node host pass), e.g. with its own request budget (`guardedKube` in shared/kube);
   * `kube` serves the invocations too when unset.
   */
  invocationKube?: () => Kube;
  /**
   * True while the API server is failing (the instance's circuit is open): a sweep then fans
   * nothing out — every pass it sent would only run into the circuit. Never true when unset.
   */
  apiFailing?: () => boolean;
  /** Enqueue now or after a delay: Workers Queues, SQS (Lambda), or the Node host's work queue. */
  queue: Queue;
  /**
   * True when `queue` hands its messages to this process's own `consume` and nothing else can
   * put one there (the Node host's work queue): bodies then travel without a MAC and are not
   * checked. Unset: the queue is a platform's, and every body on it needs kubefn's MAC
   * (runtime/message/message-mac.ts).
   */
  inProcessQueue?: boolean;
  prober: Prober;
  log: Log;
  metrics: Metrics;
  /**
   * Where each hop's span goes (the Node host's OTLP exporter, when one is configured), with the
   * trace and span ids its log lines carry. Traces live in the log lines only when unset.
   */
  spans?: Spans;
  /**
   * Whose the probe slots are (`PROBE_CONCURRENCY`, `PROBE_NAMESPACE_CONCURRENCY`): the instance's
   * when unset; `"invocation"` where a request must never wait for another's (workerd: a probe
   * shard waiting for another invocation's slot is cancelled as hung, and the slot is lost).
   */
  probeSlots?: "instance" | "invocation";
  /** Wall clock; `new Date()` when unset. */
  clock?: Clock;
  /** Jitter source; `Math.random` when unset. */
  random?: () => number;
  /**
   * What this platform adds to the options every operator is built with (e.g. manifests read from
   * its filesystem, which a Worker has not): passed through as they are; each operator reads its own.
   */
  operatorOptions?: PlatformOperatorOptions;
  /**
   * The intake's credentials, read per request: a platform that re-reads rotated secrets binds
   * it (Lambda, from Secrets Manager); the settings' `auditToken` and `relaySecret` when unset.
   */
  intakeCredentials?: () => IntakeCredentials;
  /**
   * Where state changes users route go (shared/runtime/core/state-changes.ts): an EventBridge bus
   * (Lambda), a bound Queue (Workers), a CloudEvents sink (Node host). None are published when unset.
   */
  stateChanges?: StateChangeSink;
}

/** One item of a platform's delivery: a queue body and how often the queue has delivered it. */
export interface Delivery {
  body: unknown;
  /** 1 on the first delivery; the backoff of a retry grows with it. 1 when unset. */
  attempts?: number;
}

/**
 * What the platform does with a delivered item: remove it from the queue, or deliver it again
 * after `retryAfterSeconds` (then the dead-letter queue, where the platform has one).
 */
export type Verdict =
  | { ack: true; pass?: PassResult; dropped?: true }
  | { ack: false; retryAfterSeconds: number };

/** Audit records a platform receives by other means than HTTP (a CloudWatch Logs subscription). */
export type Ingest = { source: "cloudwatch-logs"; data: string };

/** The calls every platform maps its events onto (each platform those it has events for). */
export interface Kubefn {
  /**
   * The HTTP surface: intake (`POST /v1/events`, `GET /healthz`), the operators' routes, and the fleet
   * page (`GET /`, behind the API token when one is set).
   */
  fetch(request: Request): Response | Promise<Response>;
  /**
   * This kubefn's part of the fleet page (`GET /`): its cluster's group and the page's settings.
   * A fleet's HTTP surface (`fleetFetch`) shows every cluster's group on one page.
   */
  page: { group: FleetGroup; options: FleetPageOptions };
  /**
   * One platform delivery (a Workers queue batch, a Lambda SQS batch, one of the Node
   * host's queue sends): each item is a pass or a job, run `PASS_CONCURRENCY` at a time; they
   * share one request budget (`REQUEST_BUDGET`) and, for up to 30 s, reads of shared state (an
   * operator's look at a shared gateway). Calls with the same `batch` object share those reads (the
   * Node host's queue sends, each a delivery of its own).
   * Returns one verdict per item, in order. Each pass is logged as one `pass` line, each job as
   * one `job` line, with the trace id of the chain it belongs to.
   *
   * Caveats: a pass reports its failures as follow-ups, so nearly every item is acked. An item is
   * retried when its pass crashed (a bug, or a log sink that threw) or when it was written by a
   * newer release (its envelope version is higher than this release reads); one that is not a
   * kubefn message is logged and acked.
   *
   * @example
   * const verdicts = await kubefn.consume(batch.messages.map((m) => ({ body: m.body, attempts: m.attempts })));
   * verdicts.forEach((v, i) => (v.ack ? batch.messages[i].ack() : batch.messages[i].retry({ delaySeconds: v.retryAfterSeconds })));
   */
  consume(deliveries: readonly Delivery[], options?: { batch?: object }): Promise<Verdict[]>;
  /**
   * One sweep, logged as one `sweep` line. `full` sends every object (a host's first sweep).
   * `scheduledTime` is when the platform's schedule meant it to run (Workers
   * `controller.scheduledTime`, the Scheduled Event's `time`): the sweep plans its period, and
   * counts its probe shards' delays, from it, so a cron that fires late neither doubles nor skips a
   * probe at the minute's seam.
   *
   * Caveats: a sweep is one invocation: its lists and tasks share `REQUEST_BUDGET`. Where probes
   * run in the sweep (`PROBE_SHARD_SIZE=0`), a fleet whose health changes all at once spends it on
   * probe writes, and the rest are written at the next sweep. While the circuit is open it does nothing
   * (`heldBack`).
   */
  sweep(options?: { full?: boolean; scheduledTime?: Date }): Promise<SweepSummary>;
  /**
   * Audit records delivered by other means than HTTP: a CloudWatch Logs subscription's
   * `awslogs.data` (EKS audit logs), mapped exactly as an audit webhook `EventList` and enqueued;
   * logged as one `audit log delivery` line.
   *
   * Caveats: only a failed enqueue throws (the platform should redeliver); an undecodable delivery
   * is counted and answered without work.
   */
  ingest(delivery: Ingest): Promise<CloudWatchLogsResult>;
  /**
   * Messages the platform's queue gave up on (Workers: the consumer of `kubefn-dlq`), each
   * recorded once: an error line, `kubefn_dead_letters_total{controller,kind}`, and for a pass
   * whose key names an object a Warning Event `DeadLettered` on the object read from the API
   * server. Returns one verdict per item, in order; nothing in a body but a validated key is used.
   *
   * Caveats: an item is retried only when its object could not be read (not when it is gone).
   */
  deadLetters(deliveries: readonly Delivery[]): Promise<Verdict[]>;
  /** The registered controllers' names, e.g. to start their metric series (the Node host). */
  readonly controllers: readonly string[];
}
