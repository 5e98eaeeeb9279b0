import { hasBodies, type MessageAuthenticator } from "./message-mac.ts";
import type { Message } from "./types.ts";

/**
 * The version of the queued message's envelope this release writes and reads. Releases up to
 * 0.1.0 wrote no version: such a message is read as version 1, the same shape.
 *
 * Caveats: raise it only when a message of the new shape would be misread by the release before;
 * that release then leaves it on the queue (retried with backoff, then the dead-letter queue)
 * instead of half-understanding it.
 */
export const ENVELOPE_VERSION = 1;

/**
 * What a delivered queue body is. A message is either a **pass** (one reconcile pass for one key)
 * or a **job** (a piece of the sweep's fanned-out work, e.g. a probe shard, run by a controller's
 * job handler and never by the pass executor).
 */
export type Envelope =
  | { kind: "pass"; message: Message }
  | { kind: "job"; message: Message & { shard: NonNullable<Message["shard"]> } }
  /** Written by a newer release: not read here, retried until a release that reads it takes it. */
  | { kind: "newer"; version: number }
  /** Not a kubefn message at all: logged and dropped. */
  | { kind: "invalid" };

/**
 * Opens a queue body from any platform's queue. A `snapshot` (a primary's body, which 0.1.0 attached) is dropped: no body stands in for a pass's read of its primary.
 *
 * @example
 * const envelope = openEnvelope(JSON.parse(body));
 * if (envelope.kind === "job") await runJob(ctx, registry, envelope.message);
 */
export function openEnvelope(body: unknown): Envelope {
  if (typeof body !== "object" || body === null) return { kind: "invalid" };
  const { v } = body as { v?: unknown };
  if (v !== undefined) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) return { kind: "invalid" };
    if (v > ENVELOPE_VERSION) return { kind: "newer", version: v };
  }
  if (!isMessage(body)) return { kind: "invalid" };
  if ("snapshot" in body) {
    const { snapshot: _snapshot, ...rest } = body as Message & { snapshot?: unknown };
    body = rest;
  }
  if (!isMessage(body)) return { kind: "invalid" };
  if (body.shard !== undefined) {
    const { shard } = body;
    if (
      typeof shard !== "object" ||
      shard === null ||
      typeof shard.task !== "string" ||
      !Array.isArray(shard.objects)
    ) {
      return { kind: "invalid" };
    }
    return { kind: "job", message: body as Message & { shard: NonNullable<Message["shard"]> } };
  }
  return { kind: "pass", message: body };
}

/** Whether a queue body has the shape of a {@link Message} (any version this release reads). */
export function isMessage(body: unknown): body is Message {
  if (typeof body !== "object" || body === null) return false;
  const { request, attempt } = body as Partial<Message>;
  return (
    typeof attempt === "number" &&
    typeof request === "object" &&
    request !== null &&
    typeof request.controller === "string" &&
    typeof request.name === "string" &&
    (request.namespace === undefined || typeof request.namespace === "string")
  );
}

/** `message` as this release sends it: its envelope version and the trace it belongs to. */
export function sealed(message: Message, traceparent: string | undefined): Message {
  return {
    ...message,
    v: ENVELOPE_VERSION,
    ...(traceparent && !message.traceparent ? { traceparent } : {}),
  };
}

/** What {@link authenticBodies} made of a delivered message. */
export type Authenticated =
  /** Its bodies verify (or it has none): it runs as sent. */
  | { kind: "authentic"; message: Message }
  /** A pass whose bodies do not verify, without them: it reads what it needs itself. */
  | { kind: "stripped"; message: Message }
  /** A job whose objects do not verify: not run (the next sweep plans its work again). */
  | { kind: "refused" };

/**
 * Decides what a delivered message's bodies (`listed`, a job's `shard`) may do: only what
 * kubefn vouches for runs with them. `mac` absent means no body may travel (no key is set).
 *
 * Caveats: the Node host's in-process queue never leaves the process and does not ask (its
 * bodies come from its own sweep; intake's messages carry keys only).
 */
export async function authenticBodies(
  message: Message,
  mac: MessageAuthenticator | undefined,
): Promise<Authenticated> {
  if (!hasBodies(message)) return { kind: "authentic", message };
  if (mac && (await mac.verify(message))) return { kind: "authentic", message };
  if (message.shard !== undefined) return { kind: "refused" };
  return { kind: "stripped", message: withoutBodies(message) };
}

/**
 * `message` without the objects it carries (`listed`, `listedAt`), a follow-up's reason (its
 * trigger keeps its kind, for the pass's labels) and their `mac`.
 */
export function withoutBodies(message: Message): Message {
  const { listed: _listed, listedAt: _listedAt, mac: _mac, ...bare } = message;
  if (bare.trigger?.kind === "follow-up" && bare.trigger.reason !== undefined) {
    return { ...bare, trigger: { kind: "follow-up" } };
  }
  return bare;
}
