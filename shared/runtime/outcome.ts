/** What an {@link Outcome} asks for; read by the executor, never used to build one. */
export type OutcomeKind = "done" | "awaitSweep" | "requeue" | "error";

/**
 * What happens after a pass (kube-rs's `Action`, plus the failure): opaque, built only with the
 * named constructors — {@link done}, {@link awaitSweep}, {@link requeueAfter}, {@link failed} —
 * and turned by the executor into at most one follow-up message.
 *
 * Caveats: a requeue as late as the controller's resync is never sent (the sweep comes first);
 * say {@link awaitSweep} instead, and declare the controller's requeue delays
 * (`ControllerDefinition.requeueSeconds`) so that registering it refuses one that late.
 */
export class Outcome {
  /** Makes the type nominal: an object literal with the same fields is not an Outcome. */
  readonly #opaque = true;

  private constructor(
    readonly kind: OutcomeKind,
    /** Set for `requeue`: seconds until the next pass. */
    readonly afterSeconds?: number,
    /** Set for `error`: what failed, classified once by the executor. */
    readonly error?: unknown,
    /** Optional for `requeue`: why, carried by the follow-up to the next pass (`PassContext.followUp`). */
    readonly reason?: string,
  ) {}

  /** Nothing more to do until something changes (an event, or the sweep's safety-net pass). */
  static done(): Outcome {
    return new Outcome("done");
  }

  /**
   * Look again at the next drift pass of the sweep, not sooner: the periodic look of a converged
   * object (a Running proxy's drift poll, an active SubPool's re-check). Sends no message.
   */
  static awaitSweep(): Outcome {
    return new Outcome("awaitSweep");
  }

  /**
   * Run again after `seconds` (0 = as soon as possible); must be shorter than the resync. A
   * `reason` (a short stable token) reaches the next pass as `PassContext.followUp`, so that it
   * may do only what it was sent for (a SubPool waiting to become Ready reads its readiness alone).
   */
  static requeueAfter(seconds: number, reason?: string): Outcome {
    return new Outcome("requeue", Math.max(0, seconds), undefined, reason);
  }

  /** The pass failed; the executor classifies `error` once and applies the controller's error policy. */
  static failed(error: unknown): Outcome {
    return new Outcome("error", undefined, error);
  }

  /** Whether `value` is an Outcome built by a constructor. */
  static is(value: unknown): value is Outcome {
    return typeof value === "object" && value !== null && #opaque in value;
  }
}

export const done = Outcome.done;
export const awaitSweep = Outcome.awaitSweep;
export const requeueAfter = Outcome.requeueAfter;
export const failed = Outcome.failed;
