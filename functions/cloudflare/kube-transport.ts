import {
  createServiceAccountTokenSource,
  gkeScopes,
  issuerTokenSource,
  kubeTokenSourceFrom,
} from "../../shared/app/index.ts";
import { createFetchTransport, type Transport } from "../../shared/kube/index.ts";
import type { WorkerConfig } from "./config.ts";

/**
 * The Worker's way to the API server: `fetch` with `KUBE_TOKEN`, or with a Google service
 * account's access tokens (GKE): exchanged by the GCE provider's token source, used until a minute
 * before they expire, and exchanged again at once after a 401; or with the JWTs kubefn signs as its
 * own OIDC issuer (no API credential at all: only the signing key, a Worker secret).
 *
 * `apiFetch` carries the API requests alone (the relay's tunnel, `tunnelFetch`); Google's token
 * endpoint is always reached with `doFetch`.
 *
 * Caveats: the token is cached per isolate; a new isolate exchanges once more (one request to
 * Google's token endpoint). Without the tunnel the API server's certificate must be publicly
 * trusted (GKE's DNS-based endpoint is).
 */
export function workerTransport(
  config: Pick<WorkerConfig, "kubeServer" | "kubeAuth" | "kubeTimeoutMs">,
  doFetch: typeof fetch = (input, init) => fetch(input, init),
  apiFetch: typeof fetch = doFetch,
): Transport {
  const auth = config.kubeAuth;
  const common = { server: config.kubeServer, timeoutMs: config.kubeTimeoutMs, fetch: apiFetch };
  if ("token" in auth) return createFetchTransport({ ...common, token: auth.token });
  if ("oidc" in auth) {
    return createFetchTransport({
      ...common,
      tokenSource: issuerTokenSource(auth.oidc, () => Date.now() / 1000),
    });
  }
  const google = createServiceAccountTokenSource({
    key: auth.google,
    fetch: doFetch,
    clock: { now: () => new Date() },
    scope: gkeScopes,
  });
  return createFetchTransport({ ...common, tokenSource: kubeTokenSourceFrom(google) });
}
