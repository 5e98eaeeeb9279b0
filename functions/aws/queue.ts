import { createHash } from "node:crypto";
import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from "@aws-sdk/client-eventbridge";
import { CreateScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import type { Kubefn } from "../../shared/app/index.ts";
import { isRecord } from "../../shared/guards/index.ts";
import { type Clock, fitted, type Message, type Queue, requestKey } from "../../shared/runtime/index.ts";
import type { AwsConfig } from "./config.ts";

export const SOURCE = "kubefn";
export const DETAIL_TYPE = "kubefn.reconcile";
/** Messages per event's `detail` (and per schedule's input). */
export const MAX_ENTRY_MESSAGES = 50;
/** PutEvents takes at most 10 entries per call. */
export const MAX_CALL_ENTRIES = 10;
/** Budget per PutEvents call and per schedule input; the platform's limit is 256 KB for both. */
export const MAX_CALL_BYTES = 240_000;
/** Above this a message's snapshot is dropped (the pass then GETs the object). */
export const MAX_MESSAGE_BYTES = 64_000;
/** Above this a probe shard is cut into several, so that each fits an entry or a schedule input. */
export const MAX_SHARD_BYTES = MAX_CALL_BYTES - 2_000;

/** What a `kubefn.reconcile` event carries in `detail`, on the bus and in a schedule's input. */
export interface ReconcileDetail {
  messages: Message[];
}

/**
 * A `kubefn.reconcile` event: from the bus (a full EventBridge envelope) or from a one-time
 * schedule (its `Input`, the same three fields). Only these fields are read.
 */
export interface ReconcileEvent {
  source: typeof SOURCE;
  "detail-type": typeof DETAIL_TYPE;
  detail: { messages: unknown[] };
}

export function isReconcileEvent(event: unknown): event is ReconcileEvent {
  return (
    isRecord(event) &&
    event.source === SOURCE &&
    event["detail-type"] === DETAIL_TYPE &&
    isRecord(event.detail) &&
    Array.isArray(event.detail.messages)
  );
}

/** The EventBridge rule's `rate(1 minute)` tick (infra/aws/template.yaml): one sweep. */
export function isScheduledEvent(event: unknown): boolean {
  return isRecord(event) && event.source === "aws.events" && event["detail-type"] === "Scheduled Event";
}

export interface AwsQueueOptions {
  eventBridge: EventBridgeClient;
  scheduler: SchedulerClient;
  eventBusName: string;
  scheduleGroup: string;
  schedulerRoleArn: string;
  /** The function that runs the follow-ups (this one). */
  targetArn: string;
  clock: Clock;
}

/** PutEvents accepted the call but rejected some entries. */
export class PutEventsError extends Error {
  override readonly name = "PutEventsError";
}

/**
 * The runtime's {@link Queue} on EventBridge: `send(messages)` puts `kubefn.reconcile` events on
 * the bus (a rule there invokes the function); `send(messages, delay > 0)` creates one-time
 * EventBridge Scheduler schedules, `at(due)` in UTC, that invoke the function with the same
 * event shape and delete themselves after running.
 *
 * Schedules are named `kubefn-<hash of the request keys>-<due epoch second>`, so two passes that
 * ask for the same follow-up at the same second make one schedule: the second create gets a
 * ConflictException, which counts as sent.
 *
 * Probe shards (`Message.shard`) travel whole, delayed or not: a schedule's input holds up to
 * 256 KB, like an entry. A shard above {@link MAX_SHARD_BYTES} is cut into several by its objects
 * (`request.name` gets `-1`, `-2`, …), each its own entry or schedule.
 *
 * Caveats: `at()` has whole-second syntax but Scheduler invokes with 60-second precision (at 1:00
 * means between 1:00:00 and 1:00:59), so short delays (a conflict's backoff of 1–2 s) arrive
 * late, and a probe shard's phase within the minute is not kept: a 30 s Proxy is still probed
 * twice a minute on average, not every 30 s to the second. Delayed passes drop their snapshot:
 * it would be older by the delay (a shard keeps its objects; the shard handler reads again the
 * ones whose write conflicts).
 * A call with any rejected entry throws {@link PutEventsError} naming the error codes; the
 * accepted entries are not retracted (a duplicate pass is harmless).
 */
export function awsQueue(opts: AwsQueueOptions): Queue {
  return {
    async send(messages, delaySeconds) {
      if (messages.length === 0) return;
      const cut = messages.flatMap(cutShard);
      if (delaySeconds !== undefined && delaySeconds > 0) await schedule(opts, cut, delaySeconds);
      else await putEvents(opts, cut);
    },
  };
}

async function putEvents(opts: AwsQueueOptions, messages: Message[]): Promise<void> {
  const entries = chunk(
    messages.map((m) => fitted(m, MAX_MESSAGE_BYTES, sizeOf)),
    MAX_ENTRY_MESSAGES,
    sizeOf,
  ).map(
    (batch): PutEventsRequestEntry => ({
      Source: SOURCE,
      DetailType: DETAIL_TYPE,
      Detail: JSON.stringify({ messages: batch } satisfies ReconcileDetail),
      EventBusName: opts.eventBusName,
    }),
  );
  const entrySize = (e: PutEventsRequestEntry) => bytes(`${e.Source}${e.DetailType}${e.Detail}`);
  for (const call of chunk(entries, MAX_CALL_ENTRIES, entrySize)) {
    const out = await opts.eventBridge.send(new PutEventsCommand({ Entries: call }));
    if (out.FailedEntryCount) {
      const codes = (out.Entries ?? [])
        .filter((e) => e.ErrorCode)
        .map((e) => `${e.ErrorCode}: ${e.ErrorMessage}`);
      throw new PutEventsError(
        `PutEvents rejected ${out.FailedEntryCount} of ${call.length} entries (${codes.join("; ")})`,
      );
    }
  }
}

async function schedule(opts: AwsQueueOptions, messages: Message[], delaySeconds: number): Promise<void> {
  const due = Math.ceil((opts.clock.now().getTime() + delaySeconds * 1000) / 1000);
  const at = new Date(due * 1000).toISOString().slice(0, 19);
  // Scheduler runs a schedule anywhere within its minute: a job is due at the minute's end, so
  // that one delivered in time is never taken for a late one.
  const delayed = messages.map(
    ({ snapshot: _s, listed: _l, listedAt: _at, ...rest }): Message =>
      rest.shard?.due === undefined
        ? rest
        : { ...rest, shard: { ...rest.shard, due: rest.shard.due + 60_000 } },
  );
  for (const batch of chunk(delayed, MAX_ENTRY_MESSAGES, sizeOf)) {
    const input = { source: SOURCE, "detail-type": DETAIL_TYPE, detail: { messages: batch } };
    try {
      await opts.scheduler.send(
        new CreateScheduleCommand({
          Name: scheduleName(batch, due),
          GroupName: opts.scheduleGroup,
          ScheduleExpression: `at(${at})`,
          ScheduleExpressionTimezone: "UTC",
          FlexibleTimeWindow: { Mode: "OFF" },
          ActionAfterCompletion: "DELETE",
          Target: { Arn: opts.targetArn, RoleArn: opts.schedulerRoleArn, Input: JSON.stringify(input) },
        }),
      );
    } catch (err) {
      if ((err as Error).name !== "ConflictException") throw err;
    }
  }
}

/** `kubefn-<20 hex of sha256 over the sorted keys>-<due>`: ≤ 64 chars of `[0-9a-zA-Z-_.]`. */
export function scheduleName(messages: readonly Message[], dueEpochSecond: number): string {
  const keys = messages.map((m) => requestKey(m.request)).sort();
  const hash = createHash("sha256").update(keys.join("\n")).digest("hex").slice(0, 20);
  return `kubefn-${hash}-${dueEpochSecond}`;
}

/** A probe shard above {@link MAX_SHARD_BYTES} as several, each within it; any other message as is. */
export function cutShard(message: Message): Message[] {
  if (!message.shard || sizeOf(message) <= MAX_SHARD_BYTES) return [message];
  const { shard, request } = message;
  const frame = sizeOf({ ...message, shard: { ...shard, objects: [] } }) + 16;
  const pieces = chunk(
    shard.objects,
    Number.POSITIVE_INFINITY,
    (o) => bytes(JSON.stringify(o)) + 1,
    MAX_SHARD_BYTES - frame,
  );
  return pieces.map((objects, i) => ({
    ...message,
    request: { ...request, name: `${request.name}-${i + 1}` },
    shard: { ...shard, objects },
  }));
}

/** Splits `items` into runs of at most `maxCount` items and `maxBytes` (an item above it alone). */
function chunk<T>(
  items: readonly T[],
  maxCount: number,
  size: (item: T) => number,
  maxBytes = MAX_CALL_BYTES,
): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let total = 0;
  for (const item of items) {
    const s = size(item);
    if (current.length > 0 && (current.length === maxCount || total + s > maxBytes)) {
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

const bytes = (s: string) => Buffer.byteLength(s, "utf8");
const sizeOf = (message: Message) => bytes(JSON.stringify(message)) + 1;

/** {@link awsQueue} with its SDK clients built from the Lambda's settings. */
export function awsQueueFor(
  config: AwsConfig,
  opts: { targetArn: string; clock: Clock; endpoint?: string | undefined },
): Queue {
  const aws = { region: config.region, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}) };
  return awsQueue({
    eventBridge: new EventBridgeClient(aws),
    scheduler: new SchedulerClient(aws),
    eventBusName: config.eventBusName,
    scheduleGroup: config.scheduleGroup,
    schedulerRoleArn: config.schedulerRoleArn,
    targetArn: config.functionArn ?? opts.targetArn,
    clock: opts.clock,
  });
}

/**
 * The consumer side: a `kubefn.reconcile` event's `detail.messages` as one delivery (their passes
 * share `REQUEST_BUDGET`). An async invoke has no per-item retry: when any item's verdict is a
 * retry (a crashed pass, a message from a newer release), the whole event throws so that Lambda
 * retries it (then its dead-letter queue) — passes are idempotent, so the acked ones run again
 * harmlessly.
 */
export async function consumeReconcileEvent(
  { detail: { messages } }: ReconcileEvent,
  kubefn: Pick<Kubefn, "consume">,
): Promise<{ passes: number; skipped: number }> {
  const verdicts = await kubefn.consume(messages.map((body) => ({ body })));
  const retried = verdicts.filter((v) => !v.ack).length;
  if (retried > 0) throw new Error(`${retried} of ${messages.length} messages to redeliver`);
  const skipped = verdicts.filter((v) => v.ack && v.dropped).length;
  return { passes: messages.length - skipped, skipped };
}
