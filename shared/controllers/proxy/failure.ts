import { ReconcileError } from "../../kube/index.ts";
import type { ErrorPolicy } from "../../runtime/index.ts";
import { isAllowListRefusal } from "./allow-list.ts";
import { ProxyConditionType, ProxyPhase, ProxyReason, type ProxyStatus } from "./api.ts";
import { ProviderError } from "./providers/index.ts";
import { setProvisioned, stampAt } from "./status.ts";

/**
 * The Proxy's error policy, applied by the executor to the errors the Proxy's provider answered
 * (a {@link ProviderError}, no provider of the spec's name, or an instance shape the allow-list
 * refuses):
 *
 * | class | status | follow-up |
 * | --- | --- | --- |
 * | quota | QuotaExceeded=True/QuotaExceeded (dropped by the next pass without an error) | `quotaRetrySeconds`, or the provider's Retry-After if later |
 * | permanent | PermanentError=True at this generation, Provisioned=False/PermanentError, phase Failed | none; passes at this generation are skipped; a spec edit drops the latch |
 * | transient, conflict | unchanged | backoff |
 *
 * Caveats: a failure of the pass's own Kube calls is not the Proxy's fault: it writes no
 * condition and never latches (the sweep revisits the Proxy); a quota one still waits
 * `quotaRetrySeconds`.
 */
export function proxyErrorPolicy(quotaRetrySeconds: number): ErrorPolicy {
  return {
    concerns: (err) =>
      err instanceof ProviderError ||
      (err instanceof ReconcileError &&
        (err.reason === ProxyReason.UnknownProvider || isAllowListRefusal(err.reason))),
    latch: {
      condition: ProxyConditionType.PermanentError,
      release: "drop",
      onLatch(object, error, now) {
        const status = object.status as ProxyStatus;
        setProvisioned(
          status,
          false,
          ProxyReason.PermanentError,
          `${error.reason}: ${error.message}`,
          stampAt(now, object),
        );
        status.phase = object.metadata.deletionTimestamp ? ProxyPhase.Deleting : ProxyPhase.Failed;
      },
    },
    quota: {
      condition: ProxyConditionType.QuotaExceeded,
      reason: ProxyReason.QuotaExceeded,
      retrySeconds: quotaRetrySeconds,
    },
  };
}
