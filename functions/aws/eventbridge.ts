/**
 * EventBridge events the function still receives: the sweep's one-minute tick, and the
 * `kubefn.reconcile` events of the previous release (0.x sent follow-ups on the kubefn bus and as
 * one-time Scheduler schedules; this release sends them on SQS, ./queue.ts). Schedules that
 * release left in flight run for up to the drift interval after the upgrade, so their events are
 * consumed as before.
 */
import type { Kubefn } from "../../shared/app/index.ts";
import { isRecord } from "../../shared/guards/index.ts";

export const SOURCE = "kubefn";
export const DETAIL_TYPE = "kubefn.reconcile";

/**
 * A `kubefn.reconcile` event of the previous release: from the bus (a full EventBridge envelope)
 * or from a one-time schedule (its `Input`, the same three fields). Only these fields are read.
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

/**
 * A `kubefn.reconcile` event's `detail.messages` as one delivery (their passes share
 * `REQUEST_BUDGET`); their follow-ups go to this release's queue. An async invoke has no per-item
 * retry: when any item's verdict is a retry (a crashed pass, a message from a newer release), the
 * whole event throws so that Lambda retries it (then its dead-letter queue) — passes are
 * idempotent, so the acked ones run again harmlessly.
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
