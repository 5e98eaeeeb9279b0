/**
 * What a fleet costs to run a month, from counts (pure): Workers, Lambda with either carrier for
 * delayed messages (EventBridge Scheduler, or SQS), beside an always-on controller pod. The
 * prices come from a dated table (`prices-2025.json`); `npm run bench -- cost` measures the
 * per-unit figures and prints the bill per 10,000 objects.
 *
 * Caveats: the bill is the variable part the fleet causes at steady state (nothing changing);
 * converging, changes and API server traffic (the cluster's cost) are not in it. Included
 * allowances are applied once, as if the account ran nothing else.
 */
import { MAX_CALL_BYTES, MAX_CALL_ENTRIES } from "../../functions/aws/queue.ts";

export interface Prices {
  date: string;
  source: string;
  workers: {
    baseMonthly: number;
    includedRequests: number;
    perMillionRequests: number;
    includedCpuMs: number;
    perMillionCpuMs: number;
  };
  queues: { includedOperations: number; perMillionOperations: number; operationsPerMessage: number };
  workersAnalyticsEngine: { includedDataPoints: number; perMillionDataPoints: number };
  workersLogs: { includedEvents: number; perMillionEvents: number };
  lambda: { perMillionRequests: number; perGbSecond: number; perGbSecondArm64: number };
  sqs: { perMillionRequests: number; requestsPerMessage: number };
  eventBridge: { perMillionEvents: number };
  eventBridgeScheduler: { includedInvocations: number; perMillionInvocations: number };
  cloudWatch: { perMetricMonth: number; perGbLogs: number };
  pod: { monthlyLow: number; monthlyHigh: number };
}

/** What one unit of work costs in resources: measured by the benches. */
export interface UnitCost {
  /** CPU ms (Workers bill CPU time). */
  cpuMs: number;
  /** Wall ms (Lambda bills duration). */
  wallMs: number;
  /** Log lines and their bytes (Workers Logs events; CloudWatch Logs on Lambda). */
  logLines: number;
  logBytes: number;
  /** Metric data points: Analytics Engine data points on Workers, EMF log lines on Lambda. */
  metricPoints: number;
  /** The EMF lines' bytes (CloudWatch Logs ingests them with the log lines). */
  metricBytes: number;
}

export interface FleetCounts {
  /** Primaries (Proxies and SubPools). */
  objects: number;
  /** Health-checked Proxies among them. */
  proxies: number;
  probeIntervalSeconds: number;
  /** Extra probes (latency confirmations) per due probe; each shard with one sends a re-shard. */
  confirmationShare: number;
  /** Passes per object-hour at steady state (drift, safety net, follow-ups). */
  passesPerObjectHour: number;
  sweepsPerHour: number;
  /**
   * One second of probing, measured: the Proxies due in a second (`proxies / probeIntervalSeconds`)
   * in `shards` messages of `shardBytes` (each shard's bytes), consumed by one invocation costing
   * `invocation`.
   */
  second: { proxies: number; shards: number; shardBytes: readonly number[]; invocation: UnitCost };
  /** Passes handled per invocation (a queue batch). */
  passesPerInvocation: number;
  pass: UnitCost;
  /** One sweep per 1,000 objects listed (it lists every primary each minute). */
  sweepPer1000: UnitCost;
  /** Distinct CloudWatch metrics (name × dimension values) the fleet keeps alive on Lambda. */
  customMetrics: number;
  /** ReceiveMessage calls of Lambda's SQS pollers with nothing to receive, a month. */
  sqsIdlePollsPerMonth: number;
  /** Lambda's memory size, MB (its CPU share grows with it: 1,769 MB is one vCPU). */
  lambdaMemoryMb: number;
}

export const HOURS_PER_MONTH = 730;
const SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600;
/** Queues and SQS bill each 64 KB of a message (a chunk) as one operation or request. */
export const BILLED_CHUNK_BYTES = 64 * 1024;
/** The memory size at which a Lambda function has one full vCPU. */
export const LAMBDA_MB_PER_VCPU = 1769;

export interface Line {
  item: string;
  quantity: number;
  unit: string;
  dollars: number;
}

export interface Bill {
  platform: string;
  lines: Line[];
  total: number;
}

/** The monthly volumes the fleet causes. */
export function monthlyVolumes(c: FleetCounts) {
  const interval = Math.max(1, c.probeIntervalSeconds);
  // Probes fall on every second of the interval (each Proxy on its phase): each second's Proxies
  // are one batch of shards, consumed by one invocation (scaled when the measured second held
  // another number of Proxies).
  const perSecond = c.proxies / interval;
  const scale = c.second.proxies > 0 ? perSecond / c.second.proxies : 0;
  const probeInvocations = c.proxies > 0 ? SECONDS_PER_MONTH * Math.max(1, scale) : 0;
  const probesPerMonth = perSecond * SECONDS_PER_MONTH * (1 + c.confirmationShare);
  const perShard = c.second.shards > 0 ? c.second.proxies / c.second.shards : 0;
  const withConfirmation = 1 - (1 - Math.min(1, c.confirmationShare)) ** perShard;
  const shards =
    SECONDS_PER_MONTH * c.second.shards * Math.max(scale, c.proxies > 0 ? 1 : 0) * (1 + withConfirmation);
  // Each shard is billed by its own 64 KB chunks: a shard of 65.8 KB is two, whatever the mean.
  const chunksPerShard =
    c.second.shardBytes.length > 0
      ? c.second.shardBytes.reduce((n, bytes) => n + Math.max(1, Math.ceil(bytes / BILLED_CHUNK_BYTES)), 0) /
        c.second.shardBytes.length
      : 1;
  const shardChunks = shards * chunksPerShard;
  // On SQS a sweep's shards go ten to a SendMessageBatch (each its own delay, `Queue.sendEach`),
  // within a call's 240 KB, and a call is billed per 64 KB of all it carries.
  const meanShardBytes =
    c.second.shardBytes.length > 0
      ? c.second.shardBytes.reduce((n, b) => n + b, 0) / c.second.shardBytes.length
      : BILLED_CHUNK_BYTES;
  const shardsPerCall = Math.max(1, Math.min(MAX_CALL_ENTRIES, Math.floor(MAX_CALL_BYTES / meanShardBytes)));
  const shardSendRequests =
    (shards / shardsPerCall) * Math.max(1, Math.ceil((shardsPerCall * meanShardBytes) / BILLED_CHUNK_BYTES));
  const passes = c.objects * c.passesPerObjectHour * HOURS_PER_MONTH;
  const sweeps = c.sweepsPerHour * HOURS_PER_MONTH;
  return {
    probesPerMonth,
    probeInvocations,
    shards,
    shardChunks,
    /** SendMessageBatch requests of the shards on SQS, as billed. */
    shardSendRequests,
    passes,
    sweeps,
    messages: shards + passes,
    /** Messages as billed: each shard by its 64 KB chunks, each pass one. */
    messageChunks: shardChunks + passes,
  };
}

const over = (used: number, included: number) => Math.max(0, used - included);
const perMillion = (n: number, price: number) => (n / 1e6) * price;

function usage(c: FleetCounts) {
  const v = monthlyVolumes(c);
  const sweepScale = c.objects / 1000;
  const sum = (k: keyof UnitCost) =>
    v.probeInvocations * c.second.invocation[k] +
    v.passes * c.pass[k] +
    v.sweeps * sweepScale * c.sweepPer1000[k];
  return {
    v,
    cpuMs: sum("cpuMs"),
    wallMs: sum("wallMs"),
    logLines: sum("logLines"),
    logBytes: sum("logBytes"),
    metricPoints: sum("metricPoints"),
    metricBytes: sum("metricBytes"),
    invocations: v.sweeps + v.probeInvocations + v.passes / Math.max(1, c.passesPerInvocation),
  };
}

/** Workers Paid: requests (cron and queue consumer invocations), CPU, Queues, metrics, logs. */
export function workersBill(c: FleetCounts, p: Prices): Bill {
  const u = usage(c);
  const ops = u.v.messageChunks * p.queues.operationsPerMessage;
  const lines: Line[] = [
    { item: "Workers Paid plan", quantity: 1, unit: "month", dollars: p.workers.baseMonthly },
    {
      item: "requests (cron + consumer invocations)",
      quantity: u.invocations,
      unit: "requests",
      dollars: perMillion(over(u.invocations, p.workers.includedRequests), p.workers.perMillionRequests),
    },
    {
      item: "CPU time",
      quantity: u.cpuMs,
      unit: "CPU ms",
      dollars: perMillion(over(u.cpuMs, p.workers.includedCpuMs), p.workers.perMillionCpuMs),
    },
    {
      item: "Queues operations (write, read, delete; per 64 KB)",
      quantity: ops,
      unit: "operations",
      dollars: perMillion(over(ops, p.queues.includedOperations), p.queues.perMillionOperations),
    },
    {
      item: "Analytics Engine data points (metrics)",
      quantity: u.metricPoints,
      unit: "data points",
      dollars: perMillion(
        over(u.metricPoints, p.workersAnalyticsEngine.includedDataPoints),
        p.workersAnalyticsEngine.perMillionDataPoints,
      ),
    },
    {
      item: "Workers Logs events",
      quantity: u.logLines,
      unit: "events",
      dollars: perMillion(over(u.logLines, p.workersLogs.includedEvents), p.workersLogs.perMillionEvents),
    },
  ];
  return bill("Workers", lines);
}

/**
 * Lambda's billed duration at `memoryMb` for work measured as `wallMs` of wall time and `cpuMs` of
 * CPU time on a full core: the CPU share is `memoryMb / 1,769`, so CPU-bound work stretches below
 * a vCPU (wall time = the larger of the measured wall and the CPU at that share).
 */
export function lambdaDurationMs(wallMs: number, cpuMs: number, memoryMb: number): number {
  return Math.max(wallMs, (cpuMs * LAMBDA_MB_PER_VCPU) / Math.min(memoryMb, LAMBDA_MB_PER_VCPU));
}

/**
 * Lambda (arm64): invocations, GB-seconds, the carrier of messages, CloudWatch. `carrier`: every
 * message through SQS (today's), or delayed messages as EventBridge Scheduler one-time schedules
 * and undelayed ones as EventBridge events (0.1.0's).
 */
export function lambdaBill(c: FleetCounts, p: Prices, carrier: "scheduler" | "sqs"): Bill {
  const u = usage(c);
  const sweepScale = c.objects / 1000;
  const durationMs =
    u.v.probeInvocations *
      lambdaDurationMs(c.second.invocation.wallMs, c.second.invocation.cpuMs, c.lambdaMemoryMb) +
    u.v.passes * lambdaDurationMs(c.pass.wallMs, c.pass.cpuMs, c.lambdaMemoryMb) +
    u.v.sweeps *
      lambdaDurationMs(
        c.sweepPer1000.wallMs * sweepScale,
        c.sweepPer1000.cpuMs * sweepScale,
        c.lambdaMemoryMb,
      );
  const gbSeconds = (durationMs / 1000) * (c.lambdaMemoryMb / 1024);
  const lines: Line[] = [
    {
      item: "invocations (sweep rule + messages)",
      quantity: u.invocations,
      unit: "requests",
      dollars: perMillion(u.invocations, p.lambda.perMillionRequests),
    },
    {
      item: `duration at ${c.lambdaMemoryMb} MB, arm64`,
      quantity: gbSeconds,
      unit: "GB-s",
      dollars: gbSeconds * p.lambda.perGbSecondArm64,
    },
  ];
  if (carrier === "scheduler") {
    // Shards are due at every second of the minute: one in 60 is undelayed.
    const delayed = u.v.shards * (59 / 60);
    const events = u.v.messages - delayed + u.v.sweeps;
    lines.push(
      {
        item: "EventBridge Scheduler invocations (delayed messages)",
        quantity: delayed,
        unit: "invocations",
        dollars: perMillion(
          over(delayed, p.eventBridgeScheduler.includedInvocations),
          p.eventBridgeScheduler.perMillionInvocations,
        ),
      },
      {
        item: "EventBridge events (undelayed messages, sweep rule)",
        quantity: events,
        unit: "events",
        dollars: perMillion(events, p.eventBridge.perMillionEvents),
      },
    );
  } else {
    // A sweep's shards sent ten to a SendMessageBatch (each its own delay), a pass's follow-up
    // alone; received and deleted a batch at a time, every request billed per 64 KB of its
    // payload: a receive of 164 KB is three requests.
    const batches = u.v.probeInvocations + u.v.passes / Math.max(1, c.passesPerInvocation);
    const requests =
      u.v.shardSendRequests + // SendMessageBatch of the sweep's shards
      u.v.passes + // SendMessageBatch of a follow-up
      Math.max(batches, u.v.messageChunks) + // ReceiveMessage: up to 10 messages, per 64 KB
      batches + // DeleteMessageBatch
      c.sqsIdlePollsPerMonth;
    lines.push(
      {
        item: "SQS requests (send, receive, delete per 64 KB; idle polls)",
        quantity: requests,
        unit: "requests",
        dollars: perMillion(requests, p.sqs.perMillionRequests),
      },
      {
        item: "EventBridge events (sweep rule)",
        quantity: u.v.sweeps,
        unit: "events",
        dollars: perMillion(u.v.sweeps, p.eventBridge.perMillionEvents),
      },
    );
  }
  const logGb = (u.logBytes + u.metricBytes) / 1e9;
  lines.push(
    {
      item: "CloudWatch custom metrics (EMF, one per name × dimensions)",
      quantity: c.customMetrics,
      unit: "metric-months",
      dollars: c.customMetrics * p.cloudWatch.perMetricMonth,
    },
    {
      item: "CloudWatch Logs ingested (log and EMF lines)",
      quantity: logGb,
      unit: "GB",
      dollars: logGb * p.cloudWatch.perGbLogs,
    },
  );
  return bill(`Lambda (${carrier === "scheduler" ? "EventBridge Scheduler, 0.1.0" : "SQS"})`, lines);
}

/** The always-on pod: a range, whatever the fleet's size (while it fits the pod). */
export function podBill(p: Prices): { low: number; high: number } {
  return { low: p.pod.monthlyLow, high: p.pod.monthlyHigh };
}

function bill(platform: string, lines: Line[]): Bill {
  return { platform, lines, total: lines.reduce((a, l) => a + l.dollars, 0) };
}

/** The state changes a fleet publishes a month (shared/runtime/core/state-changes.ts). */
export interface StateChangeCounts {
  /** Published per steady pass (measured: none, since a steady pass writes nothing). */
  perSteadyPass: number;
  /** Passes a month at steady state. */
  passesPerMonth: number;
  /** Proxies whose health flips, and how often each does a month (an incident: Unhealthy, then Ready). */
  flippingProxies: number;
  flipsPerProxyMonth: number;
}

/**
 * What the state changes cost a month on each sink: EventBridge bills each custom event
 * (PutEvents entry, up to 64 KB) once; Workers Queues bill each message's operations (write,
 * read, delete); the Node host's CloudEvents POSTs cost nothing billed. Delivery by a rule to
 * its target is not billed by EventBridge (the target's own service may bill).
 */
export function stateChangesBill(
  c: StateChangeCounts,
  p: Prices,
): { events: number; eventBridge: number; queues: number } {
  const events = c.perSteadyPass * c.passesPerMonth + c.flippingProxies * c.flipsPerProxyMonth * 2;
  return {
    events,
    eventBridge: (events / 1e6) * p.eventBridge.perMillionEvents,
    queues: ((events * p.queues.operationsPerMessage) / 1e6) * p.queues.perMillionOperations,
  };
}
