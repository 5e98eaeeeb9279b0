import { type DelayedMessage, fitted, type JobMessage, type Message, type Queue } from "../core/index.ts";

/**
 * Room kept under a queue's declared limit for what is added to a message after it is fitted
 * (the envelope version, its `traceparent`, an authentication tag) and for the difference
 * between the JSON size counted here and the platform's own serialisation.
 */
export const ENVELOPE_HEADROOM_BYTES = 1_024;

/**
 * Room kept per object of a job for the MAC signed after it is fitted (message-mac.ts: one tag of
 * 49 bytes an object, as JSON): a piece that is cut to fit must still fit once signed, or the
 * platform's queue would cut it again and break its MACs.
 */
export const MAC_BYTES_PER_OBJECT = 64;

/** UTF-8 bytes of `message` as JSON: how the queues here count a message's size. */
export const messageBytes = (message: Message): number => utf8Bytes(JSON.stringify(message));

/**
 * `messages` as a queue that takes at most `maxBytes` a message can carry them: a job above
 * it is cut into several by its objects ({@link cutJob}); a pass's attached objects
 * (`snapshot`, `listed`) are dropped when they would not fit ({@link fitted}: the pass then reads
 * the object). The one place where a message is made to fit; each platform's queue port declares
 * its limit (`Queue.maxMessageBytes`) and the runtime applies it to everything it sends.
 *
 * @example
 * await binding.sendBatch(fitToQueue(messages, 120_000).map((body) => ({ body })));
 *
 * Caveats: `maxBytes` undefined (an in-process queue) returns `messages` as they are. An object
 * larger than the budget on its own still travels alone in a job of one.
 */
export function fitToQueue(
  messages: readonly Message[],
  maxBytes: number | undefined,
  maxPassBytes: number | undefined = maxBytes,
): Message[] {
  if (maxBytes === undefined) return [...messages];
  const passLimit = Math.min(maxBytes, maxPassBytes ?? maxBytes);
  const budget = Math.max(1, maxBytes - ENVELOPE_HEADROOM_BYTES);
  const passBudget = Math.max(1, passLimit - ENVELOPE_HEADROOM_BYTES);
  return messages.flatMap((m) =>
    // Signed by the runtime, which fitted it first (with room for its tags): it stays whole while
    // within the queue's own limit, since cutting or stripping it now would break its MAC.
    m.mac !== undefined && messageBytes(m) <= (m.kind === "job" ? maxBytes : passLimit)
      ? [m]
      : cutJob(m, budget).map((piece) => fitted(piece, passBudget, messageBytes)),
  );
}

/** What a platform's queue takes, as its SDK says (each less the platform's own margin). */
export interface QueueLimits {
  /** The largest message, in UTF-8 bytes of its JSON. */
  maxMessageBytes: number;
  /**
   * The largest pass that keeps its listed objects (SQS bills each 64 KB of a message): above it
   * the pass reads them itself. `maxMessageBytes` when unset.
   */
  maxPassBytes?: number;
  /** Messages in one send call. */
  maxBatchMessages: number;
  /** Bytes in one send call. */
  maxBatchBytes: number;
}

/**
 * The runtime's {@link Queue} on a platform's batch send: the messages fitted to `limits`
 * ({@link fitToQueue}: a job cut by its objects, a pass's listed objects dropped), in batches
 * within them ({@link batchesOf}), each batch handed to `sendBatch` in order with the delay as
 * the caller gave it. The platform translates a batch to its SDK (and its delay to what the
 * platform takes), nothing else. With `sendDelayedBatch` the queue also has `sendEach`: messages
 * of different delays batched the same way, each entry with its own.
 *
 * @example
 * const queue = platformQueue({ maxMessageBytes: 120_000, maxBatchMessages: 100, maxBatchBytes: 200_000 },
 *   (batch, delay) => binding.sendBatch(batch.map((body) => ({ body })), delayOptions(delay)));
 */
export function platformQueue(
  limits: QueueLimits,
  sendBatch: (batch: Message[], delaySeconds: number | undefined) => Promise<unknown>,
  sendDelayedBatch?: (batch: DelayedMessage[]) => Promise<unknown>,
): Queue {
  const { maxMessageBytes, maxPassBytes } = limits;
  return {
    maxMessageBytes,
    ...(maxPassBytes === undefined ? {} : { maxPassBytes }),
    async send(messages, delaySeconds) {
      const fitted = fitToQueue(messages, maxMessageBytes, maxPassBytes);
      for (const batch of batchesOf(fitted, limits.maxBatchMessages, limits.maxBatchBytes, messageBytes)) {
        await sendBatch(batch, delaySeconds);
      }
    },
    ...(sendDelayedBatch
      ? {
          async sendEach(entries: readonly DelayedMessage[]) {
            // Each message fitted alone: the pieces of a cut job keep its delay.
            const fittedEntries = entries.flatMap(({ message, delaySeconds }) =>
              fitToQueue([message], maxMessageBytes, maxPassBytes).map((m) => ({ message: m, delaySeconds })),
            );
            const size = (e: DelayedMessage) => messageBytes(e.message);
            for (const batch of batchesOf(
              fittedEntries,
              limits.maxBatchMessages,
              limits.maxBatchBytes,
              size,
            )) {
              await sendDelayedBatch(batch);
            }
          },
        }
      : {}),
  };
}

/**
 * `items` in runs, in order, of at most `maxCount` items and `maxBytes` as `size` counts them
 * (an item above `maxBytes` travels alone): a platform's send calls.
 */
export function batchesOf<T>(
  items: readonly T[],
  maxCount: number,
  maxBytes: number,
  size: (item: T) => number,
): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let total = 0;
  for (const item of items) {
    const s = size(item);
    if (current.length > 0 && (current.length >= maxCount || total + s > maxBytes)) {
      out.push(current);
      current = [];
      total = 0;
    }
    current.push(item);
    total += s;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * A job whose message is above `maxBytes` as several, each within it: its objects in runs, in
 * order, with the job's `data` cut alongside when it is one entry per object (a probe shard's
 * resumes). The pieces' slots are `<slot>-1`, `<slot>-2`, …; a pass is returned as is.
 */
export function cutJob(message: Message, maxBytes: number): Message[] {
  if (message.kind !== "job") return [message];
  const { job } = message;
  // A message already signed carries its tags; one not yet signed needs room for them.
  const macRoom = (objects: number) => (message.mac === undefined ? objects * MAC_BYTES_PER_OBJECT : 0);
  if (messageBytes(message) + macRoom(job.objects.length) <= maxBytes) return [message];
  const data = Array.isArray(job.data) && job.data.length === job.objects.length ? job.data : undefined;
  const perObject = data !== undefined;
  const frame = messageBytes({
    ...message,
    job: { ...job, objects: [], ...(perObject ? { data: [] } : {}) },
  });
  const room = maxBytes - frame - 16;
  const runs: number[][] = [];
  let run: number[] = [];
  let used = 0;
  job.objects.forEach((object, i) => {
    const size =
      utf8Bytes(JSON.stringify(object)) +
      1 +
      (data ? utf8Bytes(JSON.stringify(data[i])) + 1 : 0) +
      macRoom(1);
    if (run.length > 0 && used + size > room) {
      runs.push(run);
      run = [];
      used = 0;
    }
    run.push(i);
    used += size;
  });
  if (run.length > 0) runs.push(run);
  if (runs.length <= 1) return [message];
  return runs.map(
    (indexes, n): JobMessage => ({
      ...message,
      job: {
        ...job,
        slot: `${job.slot}-${n + 1}`,
        objects: indexes.map((i) => job.objects[i]!),
        ...(data ? { data: indexes.map((i) => data[i]) } : {}),
      },
    }),
  );
}

const encoder = new TextEncoder();
const utf8Bytes = (s: string): number => {
  // ASCII (nearly every body) is one byte a character: skip the encoder then.
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return encoder.encode(s).length;
  return s.length;
};
