import type {
  Message as DeliveredMessage,
  MessageSendRequest,
  Queue as QueueBinding,
} from "@cloudflare/workers-types/index.ts";
import {
  batchesOf,
  bodyBytes,
  carriedBodies,
  platformQueue,
  type Queue,
  type Verdict,
} from "../../shared/app/index.ts";

/**
 * The dead-letter queue wrangler.toml gives the `kubefn` consumer: the Worker consumes it too,
 * and tells its batches apart by this name (`MessageBatch.queue`).
 */
export const DEAD_LETTER_QUEUE = "kubefn-dlq";

/** Longest delay Cloudflare Queues accept (12 h). */
export const MAX_DELAY_SECONDS = 43_200;
/** Messages per `sendBatch` call. */
export const MAX_BATCH_MESSAGES = 100;
/** Budget per `sendBatch` call (the platform's limit is 256 KB; JSON size is an estimate). */
export const MAX_BATCH_BYTES = 200_000;
/**
 * The largest message sent: the 64 KB that Queues bill as one operation of each write, read and
 * delete (the platform's per-message limit is 128 KB, billed as two). A pass's listed objects
 * above it are dropped (the pass then reads them), as on SQS.
 */
export const MAX_MESSAGE_BYTES = 64_000;
/**
 * The most JSON one job may have before the core cuts it by its objects: probe views travel
 * gzipped (about a seventh of their JSON), so a second's 300 probe views at 10,000 objects (about
 * 230 KB signed) are one message under {@link MAX_MESSAGE_BYTES}; a job whose gzip is still above
 * it is cut further (`carriedBodies`).
 */
export const MAX_SHARD_BYTES = 240_000;
/**
 * The runtime's {@link Queue} on a Queues producer binding: the core fits the messages (a job to
 * {@link MAX_SHARD_BYTES}, a pass to {@link MAX_MESSAGE_BYTES}) and batches them; each body above
 * 8 KB is sent gzipped where that is smaller (`{"gzip": …}`; the Worker's `queue` handler expands
 * it), within {@link MAX_MESSAGE_BYTES}; each batch is one `sendBatch` of at most
 * {@link MAX_BATCH_MESSAGES} and {@link MAX_BATCH_BYTES}, delayed by `delaySeconds` rounded up and
 * clamped to [0, {@link MAX_DELAY_SECONDS}].
 *
 * Caveats: the clamp never bites in practice — `runPass` sends no follow-up later than the
 * controller's resync.
 */
export function queuesPort(binding: Pick<QueueBinding<unknown>, "sendBatch">): Queue {
  const limits = {
    maxMessageBytes: MAX_SHARD_BYTES,
    maxPassBytes: MAX_MESSAGE_BYTES,
    maxBatchMessages: MAX_BATCH_MESSAGES,
    maxBatchBytes: MAX_BATCH_BYTES,
  };
  return platformQueue(limits, async (batch, delaySeconds) => {
    const delay = clampDelay(delaySeconds);
    const bodies = (await Promise.all(batch.map((m) => carriedBodies(m, MAX_MESSAGE_BYTES)))).flat();
    for (const call of batchesOf(bodies, MAX_BATCH_MESSAGES, MAX_BATCH_BYTES, bodyBytes))
      await binding.sendBatch(
        call.map((body): MessageSendRequest<unknown> => ({ body })),
        delay > 0 ? { delaySeconds: delay } : undefined,
      );
  });
}

export function clampDelay(delaySeconds: number | undefined): number {
  if (delaySeconds === undefined || !Number.isFinite(delaySeconds) || delaySeconds <= 0) return 0;
  return Math.min(MAX_DELAY_SECONDS, Math.ceil(delaySeconds));
}

/**
 * Acks or retries each delivered message as `kubefn.consume` judged it; a retry comes after the
 * verdict's delay (clamped to what Queues accept), and after `max_retries` the message goes to the
 * dead-letter queue.
 */
export function settle(
  messages: readonly Pick<DeliveredMessage, "ack" | "retry">[],
  verdicts: readonly Verdict[],
): void {
  messages.forEach((message, i) => {
    const verdict = verdicts[i];
    if (!verdict || verdict.ack) message.ack();
    else message.retry({ delaySeconds: clampDelay(verdict.retryAfterSeconds) });
  });
}
