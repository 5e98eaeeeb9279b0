import type { PassResult } from "../../shared/runtime/index.ts";

/** One pass as the fleet page lists it: what ran, why, how it ended, how long it took. */
export interface PassRecord {
  /** When the pass ended, ms since the epoch. */
  at: number;
  key: string;
  trigger: string;
  result: PassResult["result"];
  durationMs: number;
  wroteStatus: boolean;
  followUpSeconds?: number;
  errorClass?: string;
  errorReason?: string;
  /** A probe shard's counts instead of a pass. */
  shard?: Record<string, number>;
}

/**
 * The last passes this instance ran, in a fixed-size ring: memory stays bounded whatever the
 * fleet's size or the pass rate.
 *
 * Caveats: in memory, per instance. The Node host keeps every pass it ran since it started; a
 * serverless instance (a Worker isolate, a Lambda execution environment) keeps only the passes
 * that instance ran, and the instance serving the page may not be the one that ran them.
 */
export class PassHistory {
  private readonly ring: PassRecord[] = [];
  private next = 0;

  constructor(readonly capacity = 50) {}

  record(result: PassResult, at: Date): void {
    const entry: PassRecord = {
      at: at.getTime(),
      key: result.key,
      trigger: result.trigger,
      result: result.result,
      durationMs: result.durationMs,
      wroteStatus: result.wroteStatus,
      ...(result.followUpSeconds === undefined ? {} : { followUpSeconds: result.followUpSeconds }),
      ...(result.errorClass ? { errorClass: result.errorClass } : {}),
      ...(result.errorReason ? { errorReason: result.errorReason } : {}),
      ...(result.shard ? { shard: { ...result.shard } } : {}),
    };
    if (this.ring.length < this.capacity) this.ring.push(entry);
    else this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The recorded passes, newest first. */
  recent(): PassRecord[] {
    return [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)].reverse();
  }
}
