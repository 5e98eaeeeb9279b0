/** What an {@link Outcome} asks for; read by the executor, never used to build one. */
export type OutcomeKind = "done" | "awaitSweep" | "requeue" | "error";

/**
 * Annotations and labels a pass wants on its primary (`null` removes one), written by the runtime
 * with its Outcome (see {@link Outcome.withMetadata}). Finalizers are not among them: the runtime
 * owns the controller's finalizer (`ControllerDefinition.finalizer`).
 */
export interface OutcomeMetadata {
  annotations?: Readonly<Record<string, string | null>>;
  labels?: Readonly<Record<string, string | null>>;
}

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
    /** Annotations and labels to write on the primary (see {@link withMetadata}). */
    readonly metadata?: OutcomeMetadata,
  ) {}

  /**
   * This outcome, with annotations and labels the pass wants on its primary (e.g. the spec hash of
   * what it just created). The runtime writes them in one merge patch guarded by the
   * resourceVersion the pass read (after its own finalizer write), before the status write, and
   * copies the new resourceVersion onto the object; a refused write (Conflict) becomes the pass's
   * outcome, so the next pass recomputes. Calls merge, the later value winning per key.
   *
   * Caveats: written only when the pass went through the runtime (`runPass`); a test calling
   * `reconcile` directly sees them on the outcome, not on the object.
   */
  withMetadata(change: OutcomeMetadata): Outcome {
    const metadata: OutcomeMetadata = {
      ...this.metadata,
      ...(change.annotations
        ? { annotations: { ...this.metadata?.annotations, ...change.annotations } }
        : {}),
      ...(change.labels ? { labels: { ...this.metadata?.labels, ...change.labels } } : {}),
    };
    return new Outcome(this.kind, this.afterSeconds, this.error, this.reason, metadata);
  }

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
