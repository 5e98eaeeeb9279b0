import { fitted, type Message } from "./types.ts";

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
 * `messages` as a queue that takes at most `maxBytes` a message can carry them: a job (probe
 * shard) above it is cut into several by its objects ({@link cutShard}); a pass's attached objects
 * (`snapshot`, `listed`) are dropped when they would not fit ({@link fitted}: the pass then reads
 * the object). The one place where a message is made to fit; each platform's queue port declares
 * its limit (`Queue.maxMessageBytes`) and the runtime applies it to everything it sends.
 *
 * @example
 * await binding.sendBatch(fitToQueue(messages, 120_000).map((body) => ({ body })));
 *
 * Caveats: `maxBytes` undefined (an in-process queue) returns `messages` as they are. An object
 * larger than the budget on its own still travels alone in a shard of one.
 */
export function fitToQueue(messages: readonly Message[], maxBytes: number | undefined): Message[] {
  if (maxBytes === undefined) return [...messages];
  const budget = Math.max(1, maxBytes - ENVELOPE_HEADROOM_BYTES);
  return messages.flatMap((m) =>
    // Signed by the runtime, which fitted it first (with room for its tags): it stays whole while
    // within the queue's own limit, since cutting or stripping it now would break its MAC.
    m.mac !== undefined && messageBytes(m) <= maxBytes
      ? [m]
      : cutShard(m, budget).map((piece) => fitted(piece, budget, messageBytes)),
  );
}

/**
 * A job whose message is above `maxBytes` as several, each within it: its objects in runs, in
 * order, with the job's `data` cut alongside when it is one entry per object (a probe shard's
 * resumes). The pieces are named `<name>-1`, `<name>-2`, …; any other message is returned as is.
 */
export function cutShard(message: Message, maxBytes: number): Message[] {
  const { shard } = message;
  // A message already signed carries its tags; one not yet signed needs room for them.
  const macRoom = (objects: number) => (message.mac === undefined ? objects * MAC_BYTES_PER_OBJECT : 0);
  if (!shard || messageBytes(message) + macRoom(shard.objects.length) <= maxBytes) return [message];
  const data =
    Array.isArray(shard.data) && shard.data.length === shard.objects.length ? shard.data : undefined;
  const perObject = data !== undefined;
  const frame = messageBytes({
    ...message,
    shard: { ...shard, objects: [], ...(perObject ? { data: [] } : {}) },
  });
  const room = maxBytes - frame - 16;
  const runs: number[][] = [];
  let run: number[] = [];
  let used = 0;
  shard.objects.forEach((object, i) => {
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
  return runs.map((indexes, n) => ({
    ...message,
    request: { ...message.request, name: `${message.request.name}-${n + 1}` },
    shard: {
      ...shard,
      objects: indexes.map((i) => shard.objects[i]!),
      ...(data ? { data: indexes.map((i) => data[i]) } : {}),
    },
  }));
}

const encoder = new TextEncoder();
const utf8Bytes = (s: string): number => {
  // ASCII (nearly every body) is one byte a character: skip the encoder then.
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return encoder.encode(s).length;
  return s.length;
};
