import {
  AlreadyExistsError,
  ClientThrottledError,
  ConflictError,
  ForbiddenError,
  KubeError,
  NetworkError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
} from "./errors.ts";

/**
 * What to do about a failure:
 * - `transient`: retry with exponential backoff (honour `retryAfterSeconds` when set);
 * - `conflict`: someone else wrote first — requeue at once and re-read;
 * - `quota`: retry at a fixed interval and report QuotaExceeded;
 * - `permanent`: do not retry until the object's generation changes; report `reason`.
 */
export type ErrorClassName = "transient" | "conflict" | "quota" | "permanent";

export interface ErrorClass {
  class: ErrorClassName;
  /** A stable, CamelCase reason fit for a condition (e.g. "Conflict", "QuotaExceeded", "Invalid"). */
  reason: string;
  retryAfterSeconds?: number;
}

/**
 * An error that already knows its class — thrown by kubefn code outside the Kube port (a cloud
 * provider client, a validation step). {@link classifyError} trusts it as is.
 */
export interface ClassifiedError extends Error {
  readonly errorClass: ErrorClassName;
  readonly reason: string;
  readonly retryAfterSeconds?: number | undefined;
}

const errorClassNames: ReadonlySet<string> = new Set<ErrorClassName>([
  "transient",
  "conflict",
  "quota",
  "permanent",
]);

export function isClassifiedError(err: unknown): err is ClassifiedError {
  if (!(err instanceof Error)) return false;
  const candidate = err as Partial<ClassifiedError>;
  return (
    typeof candidate.errorClass === "string" &&
    errorClassNames.has(candidate.errorClass) &&
    typeof candidate.reason === "string"
  );
}

/**
 * The ready-made {@link ClassifiedError}. Build it with the named constructors.
 *
 * @example
 * throw ReconcileError.quota("InstanceQuotaExceeded", "provider refused: 20/20 instances", { cause: err });
 */
export class ReconcileError extends Error implements ClassifiedError {
  override name = "ReconcileError";
  readonly errorClass: ErrorClassName;
  readonly reason: string;
  readonly retryAfterSeconds: number | undefined;

  constructor(
    errorClass: ErrorClassName,
    reason: string,
    message: string,
    opts: { cause?: unknown; retryAfterSeconds?: number | undefined } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.errorClass = errorClass;
    this.reason = reason;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }

  static transient(reason: string, message: string, opts?: { cause?: unknown; retryAfterSeconds?: number }) {
    return new ReconcileError("transient", reason, message, opts);
  }
  static quota(reason: string, message: string, opts?: { cause?: unknown; retryAfterSeconds?: number }) {
    return new ReconcileError("quota", reason, message, opts);
  }
  static permanent(reason: string, message: string, opts?: { cause?: unknown }) {
    return new ReconcileError("permanent", reason, message, opts);
  }
}

const maxCauseDepth = 8;

/**
 * The one place kubefn decides what a failure means. Walks the `cause` chain (so a controller may
 * wrap an error with context) and classifies by the first {@link ClassifiedError} or
 * {@link KubeError} found:
 *
 * | error | class | reason |
 * | --- | --- | --- |
 * | ClassifiedError | its `errorClass` | its `reason` |
 * | 429 | transient, with `retryAfterSeconds` | TooManyRequests |
 * | 5xx, 504, Timeout, ServerTimeout, client timeout | transient, with `retryAfterSeconds` when the server sent one | the Status reason |
 * | held back by kubefn (circuit open, request budget spent) | transient, with `retryAfterSeconds` | CircuitOpen, RequestBudgetExhausted |
 * | network failure | transient | NetworkError |
 * | 409 Conflict | conflict | Conflict |
 * | 409 AlreadyExists | conflict | AlreadyExists |
 * | 403 "exceeded quota" | quota | QuotaExceeded |
 * | other 4xx | permanent | the Status reason (NotFound, Invalid, Forbidden, ...) |
 * | anything else | transient | Unknown |
 *
 * Caveats: AlreadyExists is a conflict ("requeue now"): with deterministic names it means a
 * concurrent pass won the create. A caller that can resolve it better (re-get and compare) should
 * catch it before it gets here. NotFound is permanent: catch it where absence is expected.
 */
export function classifyError(err: unknown): ErrorClass {
  let current: unknown = err;
  for (let depth = 0; depth < maxCauseDepth && current !== undefined && current !== null; depth++) {
    if (isClassifiedError(current)) {
      return withRetryAfter({ class: current.errorClass, reason: current.reason }, current.retryAfterSeconds);
    }
    if (current instanceof KubeError) return classifyKubeError(current);
    current = current instanceof Error ? current.cause : undefined;
  }
  return { class: "transient", reason: "Unknown" };
}

function classifyKubeError(err: KubeError): ErrorClass {
  if (err instanceof TooManyRequestsError) {
    return withRetryAfter({ class: "transient", reason: "TooManyRequests" }, err.retryAfterSeconds);
  }
  if (err instanceof TimeoutError) {
    return withRetryAfter({ class: "transient", reason: err.reason || "Timeout" }, err.retryAfterSeconds);
  }
  if (err instanceof ClientThrottledError) {
    return withRetryAfter({ class: "transient", reason: err.reason }, err.retryAfterSeconds);
  }
  if (err instanceof NetworkError) return { class: "transient", reason: "NetworkError" };
  if (err instanceof ServerError) {
    return withRetryAfter(
      { class: "transient", reason: err.reason || "InternalError" },
      err.retryAfterSeconds,
    );
  }
  if (err.status >= 500) return { class: "transient", reason: err.reason || "InternalError" };
  if (err instanceof AlreadyExistsError) return { class: "conflict", reason: "AlreadyExists" };
  if (err instanceof ConflictError) return { class: "conflict", reason: "Conflict" };
  if (err instanceof ForbiddenError && /exceeded quota/i.test(err.message)) {
    return { class: "quota", reason: "QuotaExceeded" };
  }
  if (err.status >= 400) return { class: "permanent", reason: err.reason || `HTTP${err.status}` };
  return { class: "transient", reason: err.reason || "Unknown" };
}

function withRetryAfter(cls: ErrorClass, retryAfterSeconds: number | undefined): ErrorClass {
  return retryAfterSeconds === undefined ? cls : { ...cls, retryAfterSeconds };
}
