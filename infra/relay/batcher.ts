import type { RelayEvent } from "../../shared/runtime/index.ts";
import type { CoalescingBuffer } from "./buffer.ts";

export interface BatchRules {
  /** Flush as soon as this many events are pending; also the most a batch carries. */
  maxEvents: number;
  /** Flush when the oldest pending event has waited this long. */
  maxDelayMs: number;
}

/**
 * When to flush, in ms from `now`: 0 for at once, `undefined` when nothing is pending.
 * `pendingSince` is when the buffer last went from empty to non-empty.
 */
export function flushDelay(
  size: number,
  pendingSince: number,
  now: number,
  rules: BatchRules,
): number | undefined {
  if (size === 0) return undefined;
  if (size >= rules.maxEvents) return 0;
  return Math.max(0, pendingSince + rules.maxDelayMs - now);
}

export interface BatcherTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: BatcherTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Takes events from the buffer in batches (at most `maxEvents`, at the latest `maxDelayMs` after
 * the first one arrived) and hands each to `deliver`, one batch in flight at a time. While a batch
 * is in flight, new events coalesce in the buffer; that is the relay's back-pressure.
 *
 * Call {@link notify} after every `buffer.put`.
 *
 * Caveats: `deliver` must not throw; it owns retries and gives up on its own terms. A throw is
 * reported to `onError` and the batch is lost (the sweep covers it).
 */
export class Batcher {
  #timer: unknown;
  #inFlight: Promise<void> | undefined;
  #pendingSince = 0;
  #stopped = false;

  constructor(
    private readonly buffer: CoalescingBuffer,
    private readonly rules: BatchRules,
    private readonly deliver: (events: RelayEvent[]) => Promise<void>,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly timers: BatcherTimers = realTimers,
  ) {}

  /** A batch is being delivered. */
  get busy(): boolean {
    return this.#inFlight !== undefined;
  }

  notify(): void {
    if (this.#stopped || this.#inFlight) return;
    if (this.#timer === undefined && this.buffer.size === 1) this.#pendingSince = this.timers.now();
    this.#schedule();
  }

  /** Resolves when no batch is in flight (the buffer may still hold events). */
  async idle(): Promise<void> {
    while (this.#inFlight) await this.#inFlight;
  }

  /** Stops scheduling; an in-flight batch finishes. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimer();
    await this.idle();
  }

  #schedule(): void {
    const delay = flushDelay(this.buffer.size, this.#pendingSince, this.timers.now(), this.rules);
    if (delay === undefined) this.#clearTimer();
    else if (delay === 0) this.#flush();
    else if (this.#timer === undefined) this.#timer = this.timers.setTimeout(() => this.#flush(), delay);
  }

  #flush(): void {
    this.#clearTimer();
    if (this.#stopped || this.#inFlight) return;
    const events = this.buffer.take(this.rules.maxEvents);
    if (events.length === 0) return;
    // Whatever stays behind has waited since before this flush; it goes at once after it.
    this.#pendingSince = this.buffer.size > 0 ? this.#pendingSince : this.timers.now();
    this.#inFlight = this.deliver(events)
      .catch(this.onError)
      .finally(() => {
        this.#inFlight = undefined;
        if (!this.#stopped) this.#schedule();
      });
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) this.timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
