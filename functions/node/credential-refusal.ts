import type { Log, Metrics } from "../../shared/app/index.ts";
import type { Transport } from "../../shared/kube/index.ts";

/**
 * `transport`, telling when its cluster's API server starts and stops refusing kubefn's
 * credential (401 Unauthorized: a revoked ServiceAccount token, a deleted ServiceAccount, an
 * expired kubeconfig): one error line when the refusals begin, one info line when an answer
 * other than 401 comes again, and the gauge `kubefn_api_credential_refused` (1 while refused) so
 * that an alert can name the cluster. Nothing else changes: the request's answer is the caller's.
 *
 * Caveats: the transport's own renewal (a token source asked again after a 401) runs inside
 * `transport`; only the 401 it could not cure is seen here.
 */
export function watchCredentialRefusal(
  transport: Transport,
  log: Log,
  metrics: Pick<Metrics, "gauge">,
): Transport {
  let refused = false;
  metrics.gauge("kubefn_api_credential_refused", 0);
  const saw = (status: number) => {
    const now = status === 401;
    if (now === refused) return;
    refused = now;
    metrics.gauge("kubefn_api_credential_refused", now ? 1 : 0);
    if (now)
      log.error(
        "the API server refuses kubefn's credential (401 Unauthorized): this cluster's passes and sweeps fail until it is restored; the other clusters go on",
        {},
      );
    else log.info("the API server accepts kubefn's credential again", {});
  };
  return {
    async request(req) {
      const res = await transport.request(req);
      saw(res.status);
      return res;
    },
  };
}
