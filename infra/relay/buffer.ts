import type { RelayEvent } from "../../shared/runtime/index.ts";

/** The coalescing key of an event: group/resource, namespace and name. */
export function eventKey(event: RelayEvent): string {
  const { group, resource } = event.resource;
  const meta = event.object.metadata;
  return `${group}/${resource}/${meta.namespace ?? ""}/${meta.name}`;
}

/**
 * The later of two events for one key. The later one wins, except that a DELETED is not undone
 * by a later ADDED/MODIFIED of the same UID (a stale event replayed after a relist); a different
 * UID is a new object and wins.
 */
export function coalesce(earlier: RelayEvent, later: RelayEvent): RelayEvent {
  if (earlier.type === "DELETED" && later.type !== "DELETED") {
    const sameObject = earlier.object.metadata.uid === later.object.metadata.uid;
    return sameObject ? earlier : later;
  }
  if (earlier.type === "ADDED" && later.type === "MODIFIED")
    return withoutReadinessOnly({ ...later, type: "ADDED" });
  // Readiness alone only when both were (a spec change in either asks for a whole pass).
  return earlier.readinessOnly ? later : withoutReadinessOnly(later);
}

function withoutReadinessOnly(event: RelayEvent): RelayEvent {
  if (!event.readinessOnly) return event;
  const { readinessOnly: _readinessOnly, ...rest } = event;
  return rest;
}

/**
 * Pending events, coalesced per key and bounded. Events wait here while a batch is in flight and
 * while intake is down; a key that changes ten times meanwhile is sent once.
 *
 * Caveats: when full, a new key drops the oldest pending event (counted by `onDrop`). That loses
 * no work for good: every event is an optimisation, and the sweep revisits every object within
 * its drift interval.
 */
export class CoalescingBuffer {
  readonly #pending = new Map<string, RelayEvent>();

  constructor(
    readonly capacity: number,
    private readonly onDrop: (event: RelayEvent) => void = () => {},
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError("capacity must be a positive integer");
  }

  get size(): number {
    return this.#pending.size;
  }

  /** Adds `event`, merging it into a pending event with the same key. Keeps the key's place in line. */
  put(event: RelayEvent): void {
    const key = eventKey(event);
    const pending = this.#pending.get(key);
    if (pending) {
      this.#pending.set(key, coalesce(pending, event));
      return;
    }
    if (this.#pending.size >= this.capacity) {
      const [oldestKey, oldest] = this.#pending.entries().next().value as [string, RelayEvent];
      this.#pending.delete(oldestKey);
      this.onDrop(oldest);
    }
    this.#pending.set(key, event);
  }

  /** Removes and returns up to `max` events, oldest first. */
  take(max: number): RelayEvent[] {
    const out: RelayEvent[] = [];
    for (const [key, event] of this.#pending) {
      if (out.length >= max) break;
      out.push(event);
      this.#pending.delete(key);
    }
    return out;
  }
}
