import { classifyError } from "../../kube/index.ts";
import { failed, type Outcome, requeueAfter } from "../../runtime/index.ts";
import { ProxyConditionType, ProxyReason, type ProxyStatus } from "./api.ts";
import { dropCondition, latchPermanentError, putCondition } from "./status.ts";

/**
 * What a failed provider call means for the Proxy, classified once by shared/kube's
 * `classifyError` (providers throw already-classified `ProviderError`s):
 *
 * | class | status | outcome |
 * | --- | --- | --- |
 * | quota | QuotaExceeded=True | `requeueAfter(quotaRetry)` (or the provider's Retry-After if later); not an error |
 * | permanent | PermanentError=True at this generation, Provisioned=False/PermanentError | `failed(err)`: logged, never retried; latched until the spec changes |
 * | transient, conflict, unknown | unchanged | `failed(err)`: the executor backs off |
 *
 * Caveats: only provider calls go through here. A permanent failure of the pass's own Kube calls
 * is not latched on the object (it is not the Proxy's fault); the sweep revisits it.
 */
export function providerFailure(
  status: ProxyStatus,
  err: unknown,
  at: { generation: number | undefined; now: Date; quotaRetrySeconds: number },
): Outcome {
  const cls = classifyError(err);
  const message = err instanceof Error ? err.message : String(err);
  switch (cls.class) {
    case "quota":
      putCondition(
        status,
        ProxyConditionType.QuotaExceeded,
        "True",
        ProxyReason.QuotaExceeded,
        message,
        at.now,
      );
      return requeueAfter(Math.max(at.quotaRetrySeconds, cls.retryAfterSeconds ?? 0));
    case "permanent":
      latchPermanentError(status, cls.reason, message, at.generation, at.now);
      return failed(err);
    case "transient":
    case "conflict":
      return failed(err);
    default:
      return failed(err);
  }
}

/** A provider call succeeded: whatever quota refusal was shown no longer holds. */
export function clearQuota(status: ProxyStatus): void {
  dropCondition(status, ProxyConditionType.QuotaExceeded);
}
