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
  lambda: { perMillionRequests: number; perGbSecond: number; memoryGb: number };
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
  shardSize: number;
  /** Extra probes (latency confirmations) per due probe; each shard with one sends a re-shard. */
  confirmationShare: number;
  /** Passes per object-hour at steady state (drift, safety net, follow-ups). */
  passesPerObjectHour: number;
  sweepsPerHour: number;
  /** Messages handled per consumer invocation (Workers Queues batches, SQS batches). */
  messagesPerInvocation: number;
  shard: UnitCost;
  pass: UnitCost;
  /** One sweep per 1,000 objects listed (it lists every primary each minute). */
  sweepPer1000: UnitCost;
  /** Distinct CloudWatch metrics (name × dimension values) the fleet keeps alive on Lambda. */
  customMetrics: number;
  /** ReceiveMessage calls of Lambda's SQS pollers with nothing to receive, a month. */
  sqsIdlePollsPerMonth: number;
}

export const HOURS_PER_MONTH = 730;

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
  // Probes fall on every second of the minute (each Proxy on its phase): a second's Proxies are
  // packed into shards of `shardSize`, the last one partly filled.
  const perSecond = c.proxies / interval;
  const shardsPerMinute = c.proxies > 0 ? 60 * Math.ceil(perSecond / Math.max(1, c.shardSize)) : 0;
  const probesPerMonth = c.proxies * (3600 / interval) * HOURS_PER_MONTH * (1 + c.confirmationShare);
  const filled = Math.min(c.shardSize, perSecond / Math.max(1, shardsPerMinute / 60));
  const withConfirmation = 1 - (1 - Math.min(1, c.confirmationShare)) ** filled;
  const shards = shardsPerMinute * 60 * HOURS_PER_MONTH * (1 + withConfirmation);
  const passes = c.objects * c.passesPerObjectHour * HOURS_PER_MONTH;
  const sweeps = c.sweepsPerHour * HOURS_PER_MONTH;
  return { probesPerMonth, shards, passes, sweeps, messages: shards + passes };
}

const over = (used: number, included: number) => Math.max(0, used - included);
const perMillion = (n: number, price: number) => (n / 1e6) * price;

function usage(c: FleetCounts) {
  const v = monthlyVolumes(c);
  const sweepScale = c.objects / 1000;
  const sum = (k: keyof UnitCost) =>
    v.shards * c.shard[k] + v.passes * c.pass[k] + v.sweeps * sweepScale * c.sweepPer1000[k];
  return {
    v,
    cpuMs: sum("cpuMs"),
    wallMs: sum("wallMs"),
    logLines: sum("logLines"),
    logBytes: sum("logBytes"),
    metricPoints: sum("metricPoints"),
    metricBytes: sum("metricBytes"),
    invocations: v.sweeps + v.messages / Math.max(1, c.messagesPerInvocation),
  };
}

/** Workers Paid: requests (cron and queue consumer invocations), CPU, Queues, metrics, logs. */
export function workersBill(c: FleetCounts, p: Prices): Bill {
  const u = usage(c);
  const ops = u.v.messages * p.queues.operationsPerMessage;
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
      item: "Queues operations (write, read, delete)",
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
 * Lambda: invocations, GB-seconds, the carrier of messages, CloudWatch. `carrier`: every message
 * through SQS (today's), or delayed messages as EventBridge Scheduler one-time schedules and
 * undelayed ones as EventBridge events (0.1.0's).
 */
export function lambdaBill(c: FleetCounts, p: Prices, carrier: "scheduler" | "sqs"): Bill {
  const u = usage(c);
  const gbSeconds = (u.wallMs / 1000) * p.lambda.memoryGb;
  const lines: Line[] = [
    {
      item: "invocations (sweep rule + messages)",
      quantity: u.invocations,
      unit: "requests",
      dollars: perMillion(u.invocations, p.lambda.perMillionRequests),
    },
    {
      item: `duration at ${p.lambda.memoryGb * 1024} MB`,
      quantity: gbSeconds,
      unit: "GB-s",
      dollars: gbSeconds * p.lambda.perGbSecond,
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
    const requests = u.v.messages * p.sqs.requestsPerMessage + c.sqsIdlePollsPerMonth;
    lines.push(
      {
        item: "SQS requests (send, receive, delete; idle polls)",
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
