import {
  type Context,
  type DelayedMessage,
  fitToQueue,
  type HopEnd,
  type HopKind,
  type Message,
  type Spans,
  sealed,
  traceFrom,
} from "../runtime/index.ts";

/** One hop of a chain (a pass, a job, a sweep, an intake batch): its context, and how it ends. */
export interface Hop {
  ctx: Context;
  end: (end: HopEnd) => void;
}

/**
 * One hop of a chain: a child span of `parent` (a message's `traceparent`), or a new trace. Its
 * context's log lines carry the trace id and this hop's span id (a pass's id); the messages it
 * sends carry the envelope version and its `traceparent`. `spans` is told as it starts, and `end`
 * tells it how the hop ended, with the `cluster` the hop worked on (nothing when there is no span
 * sink).
 */
export function tracedHop(
  ctx: Context,
  parent: string | undefined,
  kind: HopKind,
  spans: Spans | undefined,
  outgoing: (message: Message) => Promise<Message>,
  cluster: string,
): Hop {
  const trace = traceFrom(parent);
  // `span` names this hop (a pass, a job, a sweep, an intake batch): every line it writes has both.
  const fields = { trace: trace.traceId, span: trace.spanId };
  const with_ = (f?: Record<string, unknown>) => (f ? { ...f, ...fields } : fields);
  return {
    ctx: {
      ...ctx,
      log: {
        ...(ctx.log.debug ? { debug: (msg, f) => ctx.log.debug?.(msg, with_(f)) } : {}),
        info: (msg, f) => ctx.log.info(msg, with_(f)),
        warn: (msg, f) => ctx.log.warn(msg, with_(f)),
        error: (msg, f) => ctx.log.error(msg, with_(f)),
      },
      queue: sealingQueue(ctx.queue, () => trace.traceparent, outgoing),
    },
    end: spans ? endWithCluster(spans.start(kind, trace), cluster) : () => undefined,
  };
}

function endWithCluster(end: (end: HopEnd) => void, cluster: string): (end: HopEnd) => void {
  return (how) => end({ ...how, cluster });
}

/**
 * `queue`, sending each batch fitted to its limit and sealed: the envelope version, the
 * `traceparent` of `traceOf()`, and each message as `outgoing` makes it (its bodies signed).
 * Fitted before signing: each piece of a cut job is signed whole.
 */
export function sealingQueue(
  queue: Context["queue"],
  traceOf: () => string,
  outgoing: (message: Message) => Promise<Message>,
): Context["queue"] {
  return {
    send: async (messages, delaySeconds) => {
      const traceparent = traceOf();
      return queue.send(
        await Promise.all(
          fitToQueue(messages, queue.maxMessageBytes, queue.maxPassBytes).map((m) =>
            outgoing(sealed(m, traceparent)),
          ),
        ),
        delaySeconds,
      );
    },
    ...(queue.sendEach
      ? {
          sendEach: async (entries: readonly DelayedMessage[]) => {
            const traceparent = traceOf();
            const sealedEntries = await Promise.all(
              entries.flatMap(({ message, delaySeconds }) =>
                fitToQueue([message], queue.maxMessageBytes, queue.maxPassBytes).map(async (m) => ({
                  message: await outgoing(sealed(m, traceparent)),
                  delaySeconds,
                })),
              ),
            );
            return queue.sendEach?.(sealedEntries);
          },
        }
      : {}),
    ...(queue.maxMessageBytes === undefined ? {} : { maxMessageBytes: queue.maxMessageBytes }),
    ...(queue.maxPassBytes === undefined ? {} : { maxPassBytes: queue.maxPassBytes }),
  };
}
