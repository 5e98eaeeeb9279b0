import type { Log, Metrics } from "../../shared/app/index.ts";
import type { Transport } from "../../shared/kube/index.ts";

/**
 * How long 401s must go on, with no other answer between them, before the credential counts as
 * refused: an API server that has just started, or has not yet fetched kubefn's own issuer's
 * keys, answers 401 for a moment to a credential it will accept.
 */
export const CREDENTIAL_REFUSED_AFTER_MS = 10_000;

/**
 * `transport`, telling when its cluster's API server starts and stops refusing kubefn's
 * credential (401 Unauthorized: a revoked ServiceAccount token, a deleted ServiceAccount, an
 * expired kubeconfig): one error line once 401s have gone on for `refusedAfterMs` (default
 * {@link CREDENTIAL_REFUSED_AFTER_MS}), one info line when an answer other than 401 comes again,
 * and the gauge `kubefn_api_credential_refused` (1 while refused) so that an alert can name the
 * cluster. Nothing else changes: the request's answer is the caller's.
 *
 * Caveats: the transport's own renewal (a token source asked again after a 401) runs inside
 * `transport`; only the 401 it could not cure is seen here. A refusal is seen on a request: a
 * cluster sent nothing for a while is judged by its next request.
 */
export function watchCredentialRefusal(
  transport: Transport,
  log: Log,
  metrics: Pick<Metrics, "gauge">,
  opts: { refusedAfterMs?: number; now?: () => number } = {},
): Transport {
  const refusedAfterMs = opts.refusedAfterMs ?? CREDENTIAL_REFUSED_AFTER_MS;
  const now = opts.now ?? Date.now;
  /** When the 401s began (none since the last other answer: undefined). */
  let refusedSince: number | undefined;
  let refused = false;
  metrics.gauge("kubefn_api_credential_refused", 0);
  const saw = (status: number) => {
    if (status !== 401) {
      refusedSince = undefined;
      if (!refused) return;
      refused = false;
      metrics.gauge("kubefn_api_credential_refused", 0);
      log.info("the API server accepts kubefn's credential again", {});
      return;
    }
    refusedSince ??= now();
    if (refused || now() - refusedSince < refusedAfterMs) return;
    refused = true;
    metrics.gauge("kubefn_api_credential_refused", 1);
    log.error(
      "the API server refuses kubefn's credential (401 Unauthorized): this cluster's passes and sweeps fail until it is restored; the other clusters go on",
      { refusedForSeconds: Math.round((now() - refusedSince) / 1000) },
    );
  };
  return {
    async request(req) {
      const res = await transport.request(req);
      saw(res.status);
      return res;
    },
  };
}
