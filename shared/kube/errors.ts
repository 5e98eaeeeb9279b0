import type { TransportRequest, TransportResponse } from "./port.ts";

/** One entry of `Status.details.causes`, e.g. `{ field: "metadata.name", reason: "FieldValueInvalid" }`. */
export interface StatusCause {
  field?: string;
  message?: string;
  reason?: string;
}

/** `Status.details` as the API server sends it. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

/** The `metav1.Status` body of a failed API call. */
export interface Status {
  kind: "Status";
  apiVersion?: string;
  status?: "Success" | "Failure";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code?: number;
}

export interface KubeErrorInit {
  /** HTTP status code; 0 when no response arrived (network failure, client-side timeout). */
  status: number;
  /** `Status.reason` (e.g. "NotFound"), or one derived from the code when the body had none. */
  reason: string;
  details?: StatusDetails;
  /** "GET /api/v1/namespaces/x" — for messages and logs, never for decisions. */
  request?: string;
  cause?: unknown;
}

/**
 * A failed Kubernetes API call. Every `Kube` method throws only subclasses of this. Decide what to
 * do about one with `classifyError` (classify.ts), not by inspecting it here.
 */
export class KubeError extends Error {
  override name = "KubeError";
  readonly status: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  readonly request: string | undefined;

  constructor(message: string, init: KubeErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.reason = init.reason;
    this.details = init.details;
    this.request = init.request;
  }
}

/** 404: the object (or its namespace, or the resource type) does not exist. */
export class NotFoundError extends KubeError {
  override name = "NotFoundError";
}

/** 409 AlreadyExists: a create hit an existing name. */
export class AlreadyExistsError extends KubeError {
  override name = "AlreadyExistsError";
}

/**
 * 409 Conflict: stale resourceVersion or uid precondition, or a server-side apply field conflict
 * (then `details.causes` name the conflicting managers and fields).
 */
export class ConflictError extends KubeError {
  override name = "ConflictError";
}

/** 422 Invalid: the object failed validation; `causes` says which fields and why. */
export class InvalidError extends KubeError {
  override name = "InvalidError";
  get causes(): StatusCause[] {
    return this.details?.causes ?? [];
  }
}

/**
 * 403: RBAC denied the request, or an admission plugin refused it.
 *
 * Caveats: ResourceQuota admission also answers 403 ("exceeded quota: ..."); `classifyError`
 * tells the two apart.
 */
export class ForbiddenError extends KubeError {
  override name = "ForbiddenError";
}

/** 401: the credentials were missing, expired or rejected. */
export class UnauthorizedError extends KubeError {
  override name = "UnauthorizedError";
}

/**
 * A failure that may say when to try again: 429, 5xx, a timeout, or kubefn's own throttle.
 * `retryAfterSeconds` comes from the Retry-After header, else `details.retryAfterSeconds`; for
 * {@link ClientThrottledError}, when the circuit may let a request through (unset for a spent budget).
 */
export abstract class RetryAfterError extends KubeError {
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, init: KubeErrorInit & { retryAfterSeconds?: number | undefined }) {
    super(message, init);
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

/** 429: API Priority and Fairness (or a webhook) throttled the request. */
export class TooManyRequestsError extends RetryAfterError {
  override name = "TooManyRequestsError";
}

/**
 * The request did not complete in time: 504, reason Timeout or ServerTimeout, or the transport's
 * own deadline (status 0, reason "ClientTimeout").
 */
export class TimeoutError extends RetryAfterError {
  override name = "TimeoutError";
}

/** Any other 5xx. A 503 often carries Retry-After (an overloaded or restarting API server). */
export class ServerError extends RetryAfterError {
  override name = "ServerError";
}

/**
 * kubefn held the request back itself and sent nothing: the circuit is open because the API
 * server keeps failing (reason "CircuitOpen"), or this invocation spent its request budget
 * (reason "RequestBudgetExhausted"). `status` is 0. See back-pressure.ts.
 */
export class ClientThrottledError extends RetryAfterError {
  override name = "ClientThrottledError";
}

/**
 * No HTTP answer: connection refused or reset, DNS failure, TLS failure, or the caller's abort
 * signal fired. `status` is 0 and `cause` holds what the platform threw.
 */
export class NetworkError extends KubeError {
  override name = "NetworkError";
}

export function isNotFound(err: unknown): err is NotFoundError {
  return err instanceof NotFoundError;
}

export function isConflict(err: unknown): err is ConflictError {
  return err instanceof ConflictError;
}

export function isAlreadyExists(err: unknown): err is AlreadyExistsError {
  return err instanceof AlreadyExistsError;
}

/** The reason client-go assumes when a failed response carries no `Status` body. */
const reasonByCode: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Gone",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

function parseStatus(body: string): Status | undefined {
  if (body === "") return undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === "object" && parsed !== null && (parsed as { kind?: unknown }).kind === "Status") {
      return parsed as Status;
    }
  } catch {
    // Not JSON: a proxy's HTML error page, or plain text from the API server's own handlers.
  }
  return undefined;
}

/** Seconds from a Retry-After header (never negative); the HTTP-date form is accepted too. */
export function parseRetryAfter(header: string | null, now: number): number | undefined {
  if (header === null || header.trim() === "") return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/**
 * Decodes a non-2xx response into the matching {@link KubeError} subclass, from the `Status` body
 * when there is one, else from the status code alone.
 *
 * Caveats: a 409 is an {@link AlreadyExistsError} only when the body says reason AlreadyExists;
 * a bare 409 is a {@link ConflictError}.
 */
export function errorFromResponse(
  res: TransportResponse,
  req?: Pick<TransportRequest, "method" | "path">,
): KubeError {
  const status = parseStatus(res.body);
  const code = res.status;
  const reason = status?.reason || reasonByCode[code] || (code >= 500 ? "InternalError" : "Unknown");
  const request = req ? `${req.method} ${req.path}` : undefined;
  const text = status?.message || res.body.trim().slice(0, 300) || `HTTP ${code}`;
  const message = request ? `${text} (${request}: ${code} ${reason})` : text;
  const details = status?.details;
  const init: KubeErrorInit = { status: code, reason, details, request };
  const retryAfterSeconds =
    parseRetryAfter(res.headers.get("retry-after"), Date.now()) ?? details?.retryAfterSeconds;

  if (reason === "AlreadyExists") return new AlreadyExistsError(message, init);
  if (code === 504 || reason === "Timeout" || reason === "ServerTimeout") {
    return new TimeoutError(message, { ...init, retryAfterSeconds });
  }
  if (code === 429 || reason === "TooManyRequests") {
    return new TooManyRequestsError(message, { ...init, retryAfterSeconds });
  }
  if (code >= 500) return new ServerError(message, { ...init, retryAfterSeconds });
  switch (code) {
    case 401:
      return new UnauthorizedError(message, init);
    case 403:
      return new ForbiddenError(message, init);
    case 404:
      return new NotFoundError(message, init);
    case 409:
      return new ConflictError(message, init);
    case 422:
      return new InvalidError(message, init);
    default:
      return new KubeError(message, init);
  }
}

/**
 * Wraps whatever a transport threw into a {@link KubeError}: KubeErrors pass through unchanged,
 * anything else becomes a {@link NetworkError} with the original as `cause`.
 */
export function errorFromTransportFailure(
  err: unknown,
  req: Pick<TransportRequest, "method" | "path">,
): KubeError {
  if (err instanceof KubeError) return err;
  const request = `${req.method} ${req.path}`;
  const text = err instanceof Error ? describeNetworkFailure(err) : String(err);
  return new NetworkError(`${text} (${request})`, { status: 0, reason: "NetworkError", request, cause: err });
}

/** fetch's "fetch failed" hides the useful part (ECONNREFUSED, ENOTFOUND) in `cause`. */
function describeNetworkFailure(err: Error): string {
  const cause = err.cause;
  if (cause instanceof Error && cause.message && !err.message.includes(cause.message)) {
    return `${err.message}: ${cause.message}`;
  }
  return err.message;
}
