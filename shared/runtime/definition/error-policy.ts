import { errorMessage, isRecord } from "../../guards/index.ts";
import {
  type Condition,
  type ConditionInput,
  classifyError,
  conditionsOf,
  type ErrorClass,
  findCondition,
  type KubeObject,
  removeCondition,
  setCondition,
} from "../../kube/index.ts";
import type { Outcome } from "./outcome.ts";

/** Fixed retry interval after a quota error, unless the policy says otherwise (DESIGN: "fixed retry interval"). */
export const QUOTA_RETRY_SECONDS = 60;
/** Reason written on the latch condition once a newer generation passes (`release: "resolve"`). */
export const RESOLVED_REASON = "Resolved";

/** A classified error, with the message conditions show. */
export interface PolicyError extends ErrorClass {
  message: string;
}

/**
 * What a failed pass means for its object, declared once per controller (kube-rs's
 * `error_policy`) and applied by the executor: which errors latch for good and what the latch
 * writes, which are quota refusals and how long they wait, and — everything else — retries by
 * class (transient: backoff; conflict: now, then backoff).
 *
 * | error | when `concerns` it | status | follow-up |
 * | --- | --- | --- | --- |
 * | permanent | latch set | `latch.condition` True at the generation, then `latch.onLatch` | none; later passes at this generation are skipped |
 * | quota | quota condition set | `quota.condition` True (reason `quota.reason` or the classifier's) | `quota.retrySeconds` (or the Retry-After if later), attempt 0 |
 * | transient, conflict | — | unchanged | backoff |
 *
 * A pass that ends without an error drops the quota condition; a pass at a newer generation that
 * does not latch releases an old latch (`release`).
 *
 * Caveats: errors outside `concerns` (e.g. the controller's own API calls, not its object's
 * fault) write no condition and never latch; a quota one still waits `retrySeconds`. A latched
 * object that is being deleted is not skipped, so finalizers still run.
 */
export interface ErrorPolicy {
  /** Which errors are the object's own and so may latch or show the quota condition; default every error. */
  concerns?(error: unknown): boolean;
  /** The permanent-error latch; without it a permanent error is logged and not retried, and nothing is written. */
  latch?: {
    /** Condition type, True at the latched generation; one of the controller's `conditionTypes`. */
    condition: string;
    /** What a newer generation does with an old latch: set it False/`Resolved` (default) or remove it. */
    release?: "resolve" | "drop";
    /** More the latch writes into the object (e.g. another condition, a phase), after the condition. */
    onLatch?(object: KubeObject, error: PolicyError, now: Date): void;
  };
  quota?: {
    /** Condition set True on a quota error; one of the controller's `conditionTypes`. */
    condition?: string;
    /** The condition's reason; the classifier's reason when unset. */
    reason?: string;
    /** Wait before the retry; {@link QUOTA_RETRY_SECONDS} when unset. */
    retrySeconds?: number;
  };
}

/** Whether `object` is latched: the latch condition True at its current generation, and it is not being deleted. */
export function isLatched(policy: ErrorPolicy | undefined, object: KubeObject): boolean {
  if (!policy?.latch || object.metadata.deletionTimestamp) return false;
  return latchedAt(conditionsOf(object), policy.latch.condition, object.metadata.generation);
}

/** Whether condition `type` is True and was set at `generation` (for phases computed from status). */
export function latchedAt(
  conditions: readonly Condition[] | undefined,
  type: string,
  generation: number | undefined,
): boolean {
  const c = findCondition(conditions, type);
  return c?.status === "True" && c.observedGeneration !== undefined && c.observedGeneration === generation;
}

/**
 * Applies `policy` to the object a pass leaves behind (in place, before the status write): the
 * latch or the quota condition for an error the policy concerns, or the release of an old latch
 * and of the quota condition after a pass that ended without one. Pure but for `object`.
 */
export function applyErrorPolicy(
  policy: ErrorPolicy | undefined,
  object: KubeObject,
  outcome: Outcome,
  now: Date,
): void {
  if (!policy) return;
  const generation = object.metadata.generation;
  const at = generation === undefined ? {} : { observedGeneration: generation };
  const error = outcome.kind === "error" ? policyError(outcome.error) : undefined;
  const concerned = error !== undefined && (policy.concerns?.(outcome.error) ?? true);
  const latch = policy.latch;
  if (latch) {
    const held = findCondition(conditionsOf(object), latch.condition);
    if (concerned && error.class === "permanent") {
      put(
        object,
        { type: latch.condition, status: "True", reason: error.reason, message: error.message, ...at },
        now,
      );
      latch.onLatch?.(object, error, now);
    } else if (held && held.observedGeneration !== generation) {
      if (latch.release === "drop") drop(object, latch.condition);
      else if (held.status === "True") {
        put(
          object,
          { type: latch.condition, status: "False", reason: RESOLVED_REASON, message: "", ...at },
          now,
        );
      }
    }
  }
  const quota = policy.quota?.condition;
  if (!quota) return;
  if (concerned && error.class === "quota") {
    const reason = policy.quota?.reason ?? error.reason;
    put(object, { type: quota, status: "True", reason, message: error.message, ...at }, now);
  } else if (!error) {
    drop(object, quota);
  }
}

function policyError(error: unknown): PolicyError {
  return { ...classifyError(error), message: errorMessage(error) };
}

function put(object: KubeObject, input: ConditionInput, now: Date): void {
  const { conditions, changed } = setCondition(conditionsOf(object), input, now);
  if (!changed) return;
  const status = isRecord(object.status) ? object.status : {};
  status.conditions = conditions;
  object.status = status;
}

function drop(object: KubeObject, type: string): void {
  const { conditions, changed } = removeCondition(conditionsOf(object), type);
  if (!changed || !isRecord(object.status)) return;
  if (conditions.length > 0) object.status.conditions = conditions;
  else delete object.status.conditions;
}
