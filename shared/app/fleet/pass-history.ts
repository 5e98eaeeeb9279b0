import type { PassResult } from "../../runtime/index.ts";

/** A pass as the fleet page lists it: what ran, why, how it ended, and when (ms since the epoch). */
export type PassRecord = PassResult & { at: number };

/**
 * The last passes this instance ran, in a fixed-size ring: memory stays bounded whatever the
 * fleet's size or the pass rate.
 *
 * Caveats: in memory, per instance, lost on restart. On the Node host every pass runs in the one
 * process; a serverless instance (a Worker isolate, a Lambda execution environment) keeps only
 * the passes it ran, and the instance serving the page may not be one that ran any.
 */
export class PassHistory {
  private readonly ring: PassRecord[] = [];
  private next = 0;

  constructor(readonly capacity = 50) {}

  record(result: PassResult, at: Date): void {
    const entry: PassRecord = { ...result, at: at.getTime() };
    if (this.ring.length < this.capacity) this.ring.push(entry);
    else this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The recorded passes, newest first. */
  recent(): PassRecord[] {
    return [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)].reverse();
  }
}
