/**
 * W3C Trace Context (`traceparent`, version 00) for the chain of work one change causes: an
 * intake batch, the passes it enqueued, their follow-ups, a sweep's probe shards and the passes
 * they trigger share one trace id; each hop is a span of its own.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A trace's place in a chain: its id, this hop's span id, and the header that names both. */
export interface TraceContext {
  traceId: string;
  spanId: string;
  /** The span this hop continues (the sender's), when there is one. */
  parentSpanId?: string;
  /** `00-<trace id>-<span id>-01`, for the messages this hop sends. */
  traceparent: string;
}

/**
 * A new hop: a child span of `parent` (a `traceparent` header or a message's field) when it is
 * well formed and not all zeros, or the root of a new trace.
 *
 * @example
 * const trace = traceFrom(message.traceparent); // same traceId, new spanId
 */
export function traceFrom(parent: string | undefined): TraceContext {
  const m = parent ? TRACEPARENT.exec(parent) : null;
  const traceId = m && !/^0+$/.test(m[1]!) && !/^0+$/.test(m[2]!) ? m[1]! : randomHex(16);
  const spanId = randomHex(8);
  return {
    traceId,
    spanId,
    ...(m && traceId === m[1] ? { parentSpanId: m[2]! } : {}),
    traceparent: `00-${traceId}-${spanId}-01`,
  };
}

function randomHex(bytes: number): string {
  const out = crypto.getRandomValues(new Uint8Array(bytes));
  let hex = "";
  for (const b of out) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/** What a hop is: an intake batch, a pass, a job (a probe shard), a sweep. */
export type HopKind = "intake" | "pass" | "job" | "sweep";

/** How a hop ended, as its log line says it: what a span exporter turns into attributes. */
export interface HopEnd {
  /** A pass's object (its kind, when the registry knows it), or the controller a job ran for. */
  request?: { controller: string; namespace?: string; name?: string; kind?: string };
  /** A pass's or job's result (`done`, `requeue`, `error`, …); `done` or `error` for the others. */
  result: string;
  /** What brought a pass about (`audit`, `relay`, `follow-up`, `drift:<reason>`, …). */
  trigger?: string;
  /** A job's task (`proxy-health`). */
  task?: string;
  /** A failed pass's error class (`transient`, `conflict`, `quota`, `permanent`), or `crashed`. */
  errorClass?: string;
  /** An intake batch's sender (`audit`, `relay`, `pubsub`, `cloudwatch-logs`) and messages sent. */
  source?: string;
  enqueued?: number;
  /** The cluster the hop worked on: a declared cluster's name (`default` for today's one cluster). */
  cluster?: string;
}

/**
 * The platform's span sink (the Node host's OTLP exporter): told as each hop starts, with the
 * trace and span ids kubefn made and its log lines carry, so exported spans and logs join; the
 * function it returns is called once, as the hop ends.
 *
 * Caveats: called on every pass; the sink must not block or throw (an export is queued, not sent).
 *
 * @example
 * const end = spans.start("pass", traceFrom(message.traceparent));
 * end({ request: message.request, result: pass.result, trigger: pass.trigger });
 */
export interface Spans {
  start(kind: HopKind, trace: TraceContext): (end: HopEnd) => void;
}
