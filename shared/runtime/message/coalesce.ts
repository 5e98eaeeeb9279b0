import type { Message, PassMessage } from "../core/index.ts";
import { createdReason } from "../definition/index.ts";

/**
 * One message for two of the same key (`messageKey`), for a queue that keeps one message a key
 * (the Node host's work queue). A job: the later one (the same slot's job of the next sweep
 * replaces the previous one). A pass: the later one's fields winning; a UID stays only when both
 * were decided for it: a message without one (an event) may be for a recreated object, and a
 * stale follow-up must not swallow it. Without a UID the pass reads afresh and acts on whatever
 * object it finds, so the listed owned objects go too.
 */
export function coalesce(earlier: Message, later: Message): Message {
  if (earlier.kind === "job" || later.kind === "job") return later;
  const merged = coalesceFields(earlier, later);
  // A reasoned follow-up or event asks for a narrower pass (a SubPool's look at its readiness
  // alone): merged with any other message, the pass does what that one asked.
  if (narrowed(later) && !(narrowed(earlier) && earlier.trigger!.reason === later.trigger!.reason)) {
    const { trigger: _trigger, ...rest } = merged;
    return earlier.trigger ? { ...rest, trigger: earlier.trigger } : rest;
  }
  return merged;
}

/** A creation's reason asks for no narrower pass: only that its finalizer may be added unread. */
const narrowed = (m: PassMessage): boolean =>
  (m.trigger?.kind === "follow-up" || m.trigger?.kind === "audit" || m.trigger?.kind === "relay") &&
  !!m.trigger.reason &&
  m.trigger.reason !== createdReason;

function coalesceFields(earlier: PassMessage, later: PassMessage): PassMessage {
  if (earlier.uid !== undefined && earlier.uid === later.uid) return later;
  const { uid: _uid, listedAt: _listedAt, listed: _listed, mac: _mac, ...rest } = later;
  return later.uid === undefined ? later : rest;
}
