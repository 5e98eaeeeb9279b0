import type {
  Message as DeliveredMessage,
  MessageSendRequest,
  Queue as QueueBinding,
} from "@cloudflare/workers-types/index.ts";
import type { Verdict } from "../../shared/app/index.ts";
import type { Message, Queue } from "../../shared/runtime/index.ts";
import { fitToQueue, messageBytes } from "../../shared/runtime/index.ts";

/** Longest delay Cloudflare Queues accept (12 h). */
export const MAX_DELAY_SECONDS = 43_200;
/** Messages per `sendBatch` call. */
export const MAX_BATCH_MESSAGES = 100;
/** Budget per `sendBatch` call (the platform's limit is 256 KB; JSON size is an estimate). */
export const MAX_BATCH_BYTES = 200_000;
/**
 * The largest message sent (the platform's per-message limit is 128 KB): a probe shard above it
 * is cut into several, a pass's listed objects above it dropped (`fitToQueue`).
 */
export const MAX_MESSAGE_BYTES = 120_000;

/**
 * The runtime's {@link Queue} on a Queues producer binding: `send(messages, delay)` becomes
 * `sendBatch` calls of at most {@link MAX_BATCH_MESSAGES} messages and {@link MAX_BATCH_BYTES},
 * delayed by `delaySeconds` rounded up and clamped to [0, {@link MAX_DELAY_SECONDS}].
 *
 * Caveats: the clamp never bites in practice — `runPass` sends no follow-up later than the
 * controller's resync. It declares {@link MAX_MESSAGE_BYTES}, which the runtime fits every message
 * to before sealing it; a message sent here directly is fitted alike (a probe shard cut by its
 * objects, a pass's listed objects dropped: the pass then GETs them) rather than failing the batch.
 */
export function queuesPort(binding: Pick<QueueBinding<Message>, "sendBatch">): Queue {
  return {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    async send(messages, delaySeconds) {
      const delay = clampDelay(delaySeconds);
      const options = delay > 0 ? { delaySeconds: delay } : undefined;
      for (const chunk of chunksOf(fitToQueue(messages, MAX_MESSAGE_BYTES))) {
        await binding.sendBatch(
          chunk.map((body): MessageSendRequest<Message> => ({ body })),
          options,
        );
      }
    },
  };
}

export function clampDelay(delaySeconds: number | undefined): number {
  if (delaySeconds === undefined || !Number.isFinite(delaySeconds) || delaySeconds <= 0) return 0;
  return Math.min(MAX_DELAY_SECONDS, Math.ceil(delaySeconds));
}

function* chunksOf(messages: Message[]): Generator<Message[]> {
  let chunk: Message[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = sizeOf(message);
    if (chunk.length > 0 && (chunk.length === MAX_BATCH_MESSAGES || bytes + size > MAX_BATCH_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

const sizeOf = (message: Message) => messageBytes(message);

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
