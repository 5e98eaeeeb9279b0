import {
  ChangeMessageVisibilityBatchCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SQSClient,
} from "@aws-sdk/client-sqs";
import {
  batchesOf,
  type Clock,
  carriedBodies,
  expandedBody,
  type Kubefn,
  type Log,
  type Message,
  platformQueue,
  type Queue,
  type Verdict,
} from "../../shared/app/index.ts";
import { isRecord } from "../../shared/guards/index.ts";
import type { AwsConfig } from "./config.ts";

/** Longest per-message delay SQS accepts (15 min). */
export const MAX_DELAY_SECONDS = 900;
/** Longest visibility timeout SQS accepts (12 h): the cap of a retry's delay. */
export const MAX_VISIBILITY_SECONDS = 43_200;
/** SendMessageBatch and ChangeMessageVisibilityBatch take at most 10 entries per call. */
export const MAX_CALL_ENTRIES = 10;
/** Budget per SendMessageBatch call and per message; the platform's limit is 256 KB for both. */
export const MAX_CALL_BYTES = 240_000;
/** Above this a pass's listed objects are dropped (the pass then GETs them): SQS bills each 64 KB. */
export const MAX_MESSAGE_BYTES = 64_000;
/** Above this a job is cut into several, so that each fits one SQS message. */
export const MAX_SHARD_BYTES = MAX_CALL_BYTES - 2_000;
/**
 * Message attribute of a message delayed beyond {@link MAX_DELAY_SECONDS}: its due time (epoch
 * seconds). A delivery before it is sent again with the remaining delay, and not consumed.
 */
export const DUE_ATTRIBUTE = "kubefn-due";

export interface SqsQueueOptions {
  sqs: SQSClient;
  /** The reconcile queue (infra/aws/template.yaml `ReconcileQueue`), whose event source is this function. */
  queueUrl: string;
  clock: Clock;
}

/** SendMessageBatch accepted the call but rejected some entries. */
export class SendMessageBatchError extends Error {
  override readonly name = "SendMessageBatchError";
}

/**
 * The runtime's {@link Queue} on SQS: one SQS message per kubefn message (so that a batch's
 * verdicts are per message), sent with SendMessageBatch, at most {@link MAX_CALL_ENTRIES} and
 * {@link MAX_CALL_BYTES} per call; `delaySeconds` becomes the message's `DelaySeconds`, rounded
 * up — second precision up to 15 minutes. A longer delay is sent as 900 s with its due time in
 * the {@link DUE_ATTRIBUTE} attribute, and {@link consumeSqsEvent} sends it on with what remains
 * until it is due (no Scheduler, no second carrier).
 *
 * The core fits each message (a job above {@link MAX_SHARD_BYTES} cut by its objects, a pass's
 * listed objects above {@link MAX_MESSAGE_BYTES} dropped: the pass then GETs them) and batches
 * them by {@link MAX_CALL_ENTRIES} and {@link MAX_CALL_BYTES}. A body above 8 KB is sent gzipped
 * (`{"gzip": …}`, `carriedBodies`) where that is smaller — SQS bills every 64 KB of a request, and
 * a second's 300 probe views of 10,000 objects are then one request, not three;
 * {@link consumeSqsEvent} expands it.
 *
 * Caveats: a call with any rejected entry throws {@link SendMessageBatchError} naming the error
 * codes; the accepted entries are not retracted (a duplicate pass is harmless).
 */
export function sqsQueue(opts: SqsQueueOptions): Queue {
  const limits = {
    maxMessageBytes: MAX_SHARD_BYTES,
    maxPassBytes: MAX_MESSAGE_BYTES,
    maxBatchMessages: MAX_CALL_ENTRIES,
    maxBatchBytes: MAX_CALL_BYTES,
  };
  // Each body gzipped where that is smaller: SQS bills every 64 KB of a request.
  const bodiesOf = async (m: Message) =>
    (await carriedBodies(m, MAX_SHARD_BYTES)).map((b) => JSON.stringify(b));
  return platformQueue(
    limits,
    async (batch, delaySeconds) => {
      const timing = timingOf(opts.clock, delaySeconds);
      const bodies = (await Promise.all(batch.map(bodiesOf))).flat();
      return sendBodies(
        opts,
        bodies.map((body) => ({ body, ...timing })),
      );
    },
    // A sweep's probe shards, each at its own delay, ten to a call: a third of the requests.
    async (batch) => {
      const entries = await Promise.all(
        batch.map(async ({ message, delaySeconds }) => {
          const timing = timingOf(opts.clock, delaySeconds);
          return (await bodiesOf(message)).map((body) => ({ body, ...timing }));
        }),
      );
      return sendBodies(opts, entries.flat());
    },
  );
}

/** A delay as SQS takes it: whole seconds, and past 15 minutes the due time to send it on at. */
function timingOf(
  clock: Clock,
  delaySeconds: number | undefined,
): { delay: number; due: number | undefined } {
  const delay = wholeDelay(delaySeconds);
  return { delay, due: delay > MAX_DELAY_SECONDS ? epochSeconds(clock) + delay : undefined };
}

/**
 * Sends `bodies` to the reconcile queue as they are, undelayed: the intake function passing on
 * the previous release's `kubefn.reconcile` events (./eventbridge.ts), which the reconcile
 * function then consumes (one that is not a kubefn message is dropped and counted there).
 */
export function forwardBodies(opts: SqsQueueOptions, bodies: readonly unknown[]): Promise<void> {
  return sendBodies(
    opts,
    bodies.map((b) => ({ body: JSON.stringify(b), delay: 0, due: undefined })),
  );
}

/** A body to send, its delay (whole seconds) and, past 15 minutes, its due time. */
interface OutgoingBody {
  body: string;
  delay: number;
  due: number | undefined;
}

async function sendBodies(opts: SqsQueueOptions, bodies: readonly OutgoingBody[]): Promise<void> {
  for (const call of batchesOf(bodies, MAX_CALL_ENTRIES, MAX_CALL_BYTES, (b) => bytes(b.body))) {
    const entries = call.map(
      ({ body, delay, due }, i): SendMessageBatchRequestEntry => ({
        Id: String(i),
        MessageBody: body,
        DelaySeconds: Math.min(delay, MAX_DELAY_SECONDS),
        ...(due === undefined
          ? {}
          : { MessageAttributes: { [DUE_ATTRIBUTE]: { DataType: "Number", StringValue: String(due) } } }),
      }),
    );
    const out = await opts.sqs.send(
      new SendMessageBatchCommand({ QueueUrl: opts.queueUrl, Entries: entries }),
    );
    const failed = out.Failed ?? [];
    if (failed.length > 0) {
      const codes = failed.map((f) => `${f.Code}: ${f.Message}`);
      throw new SendMessageBatchError(
        `SendMessageBatch rejected ${failed.length} of ${entries.length} messages (${codes.join("; ")})`,
      );
    }
  }
}

/** An SQS record as the event source mapping delivers it; only these fields are read. */
export interface SqsRecord {
  eventSource: "aws:sqs";
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: { ApproximateReceiveCount?: string };
  messageAttributes?: Record<string, { stringValue?: string | null } | undefined>;
}

/** A batch from the reconcile queue's event source mapping. */
export interface SqsEvent {
  Records: SqsRecord[];
}

export function isSqsEvent(event: unknown): event is SqsEvent {
  return (
    isRecord(event) &&
    Array.isArray(event.Records) &&
    event.Records.length > 0 &&
    event.Records.every(
      (r) =>
        isRecord(r) &&
        r.eventSource === "aws:sqs" &&
        typeof r.messageId === "string" &&
        typeof r.receiptHandle === "string" &&
        typeof r.body === "string" &&
        isRecord(r.attributes),
    )
  );
}

/** The answer `FunctionResponseTypes: [ReportBatchItemFailures]` asks for: the records to redeliver. */
export interface BatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

/**
 * One SQS batch as one delivery of `kubefn.consume` (the passes share `REQUEST_BUDGET`): each
 * record's body is a message, its `ApproximateReceiveCount` the attempts. A record the verdict
 * retries is reported in `batchItemFailures` after its visibility timeout was changed to the
 * verdict's `retryAfterSeconds`, so it comes back then rather than after the queue's default;
 * after the redrive policy's `maxReceiveCount` it goes to the dead-letter queue. A record not due
 * yet ({@link DUE_ATTRIBUTE}) is sent again with the remaining delay and acked.
 *
 * Caveats: a failed visibility change is logged and the record still reported: it returns after
 * the queue's visibility timeout instead. A failed re-send of an early record reports that record.
 */
export async function consumeSqsEvent(
  event: SqsEvent,
  kubefn: Pick<Kubefn, "consume">,
  opts: SqsQueueOptions & { log: Log },
): Promise<BatchResponse> {
  const now = epochSeconds(opts.clock);
  const early = event.Records.filter((r) => dueOf(r) > now);
  const ready = event.Records.filter((r) => !(dueOf(r) > now));
  const failures: SqsRecord[] = [];
  for (const record of early) {
    const due = dueOf(record);
    try {
      await sendBodies(opts, [{ body: record.body, delay: due - now, due }]);
    } catch (err) {
      opts.log.error("delayed message not sent on; redelivering", {
        messageId: record.messageId,
        error: String(err),
      });
      failures.push(record);
    }
  }
  const verdicts = await kubefn.consume(
    await Promise.all(
      ready.map(async (r) => ({
        body: await expandedBody(parsedBody(r.body)),
        attempts: Number(r.attributes.ApproximateReceiveCount) || 1,
      })),
    ),
  );
  const retried = ready.flatMap((record, i) => {
    const verdict = verdicts[i];
    return verdict && !verdict.ack ? [{ record, verdict }] : [];
  });
  await changeVisibility(opts, retried);
  failures.push(...retried.map((r) => r.record));
  return { batchItemFailures: failures.map((r) => ({ itemIdentifier: r.messageId })) };
}

async function changeVisibility(
  opts: SqsQueueOptions & { log: Log },
  retried: readonly { record: SqsRecord; verdict: Extract<Verdict, { ack: false }> }[],
): Promise<void> {
  for (const call of batchesOf(retried, MAX_CALL_ENTRIES, MAX_CALL_BYTES, () => 0)) {
    try {
      const out = await opts.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: opts.queueUrl,
          Entries: call.map(({ record, verdict }, i) => ({
            Id: String(i),
            ReceiptHandle: record.receiptHandle,
            VisibilityTimeout: Math.min(MAX_VISIBILITY_SECONDS, wholeDelay(verdict.retryAfterSeconds)),
          })),
        }),
      );
      for (const f of out.Failed ?? []) {
        opts.log.warn("visibility not changed; the message returns after the queue's default", {
          messageId: call[Number(f.Id)]?.record.messageId,
          code: f.Code,
        });
      }
    } catch (err) {
      opts.log.warn("visibility not changed; the messages return after the queue's default", {
        messages: call.length,
        error: String(err),
      });
    }
  }
}

/** The record's {@link DUE_ATTRIBUTE} in epoch seconds; 0 when it has none (due now). */
function dueOf(record: SqsRecord): number {
  const value = Number(record.messageAttributes?.[DUE_ATTRIBUTE]?.stringValue);
  return Number.isFinite(value) ? value : 0;
}

/** The body as JSON, or as the string it is (consume drops it as not a kubefn message). */
function parsedBody(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

/** `delaySeconds` in whole seconds, rounded up; 0 when absent, negative or not finite. */
function wholeDelay(delaySeconds: number | undefined): number {
  if (delaySeconds === undefined || !Number.isFinite(delaySeconds) || delaySeconds <= 0) return 0;
  return Math.ceil(delaySeconds);
}

const epochSeconds = (clock: Clock) => Math.floor(clock.now().getTime() / 1000);

const bytes = (s: string) => Buffer.byteLength(s, "utf8");

/** The options of {@link sqsQueue} and {@link consumeSqsEvent}, the SDK client built from the Lambda's settings. */
export function sqsQueueOptionsFor(
  config: AwsConfig,
  opts: { clock: Clock; endpoint?: string | undefined },
): SqsQueueOptions {
  const aws = { region: config.region, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}) };
  return { sqs: new SQSClient(aws), queueUrl: config.queueUrl, clock: opts.clock };
}
