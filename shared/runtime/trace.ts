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
