import { errorMessage } from "../guards/index.ts";
import { NetworkError, TimeoutError } from "./errors.ts";
import type { TransportRequest } from "./port.ts";

/** The per-request deadline both transports apply when the caller sets none. */
export const defaultRequestTimeoutMs = 30_000;

export interface RequestDeadline {
  /** Fires on the caller's abort or when the deadline passes. */
  readonly signal: AbortSignal;
  /** Turns what the platform threw into a TimeoutError (deadline) or NetworkError (anything else). */
  failure(err: unknown): TimeoutError | NetworkError;
}

/**
 * A deadline for one transport request, joined with the caller's own abort signal.
 *
 * Caveats: the deadline covers reading the body too, so a server that stalls mid-body still ends in
 * a TimeoutError (status 0, reason "ClientTimeout").
 */
export function requestDeadline(req: TransportRequest, timeoutMs = defaultRequestTimeoutMs): RequestDeadline {
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, deadline]) : deadline;
  const request = `${req.method} ${req.path}`;
  return {
    signal,
    failure(err) {
      if (deadline.aborted && !req.signal?.aborted) {
        return new TimeoutError(`no answer within ${timeoutMs} ms (${request})`, {
          status: 0,
          reason: "ClientTimeout",
          request,
          cause: err,
        });
      }
      const text = errorMessage(err);
      const detail = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
      return new NetworkError(`${text}${detail} (${request})`, {
        status: 0,
        reason: req.signal?.aborted ? "Aborted" : "NetworkError",
        request,
        cause: err,
      });
    },
  };
}
