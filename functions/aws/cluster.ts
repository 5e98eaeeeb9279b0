import { KubeConfig } from "@kubernetes/client-node";
import {
  type Clock,
  createServiceAccountTokenSource,
  gkeScopes,
  kubeTokenSourceFrom,
} from "../../shared/app/index.ts";
import type { GuardedKube, TokenSource } from "../../shared/kube/index.ts";
import { guardedNodeKube, loadKubeConfig } from "../../shared/kube/node.ts";
import type { AwsConfig } from "./config.ts";
import { eksTokenSource, lambdaRoleCredentials } from "./eks-token.ts";

/**
 * The cluster's Kube as the settings say to reach it: through the kubeconfig; on EKS as the
 * function's own IAM role (tokens minted from its credentials, ./eks-token.ts); or with a Google
 * service account's access tokens (GKE), exchanged by the GCE provider's token source. The last
 * two renew their tokens themselves and hold no kubeconfig.
 */
export function clusterKube(
  config: AwsConfig,
  from: { env: Record<string, string | undefined>; clock: Clock; fetch?: typeof fetch },
): GuardedKube {
  const cluster = config.kubeconfig;
  if ("eks" in cluster) {
    const { eks } = cluster;
    const tokens = eksTokenSource({
      clusterName: eks.clusterName,
      region: config.region,
      credentials: lambdaRoleCredentials(from.env),
      renewAfterMs: eks.renewAfterMs,
      now: () => from.clock.now().getTime(),
    });
    return guardedNodeKube(endpointKubeConfig(eks.server, eks.caData), config, tokens);
  }
  if ("google" in cluster) {
    const { google } = cluster;
    const tokens: TokenSource = kubeTokenSourceFrom(
      createServiceAccountTokenSource({
        key: google.key,
        fetch: from.fetch ?? ((input, init) => fetch(input, init)),
        clock: from.clock,
        scope: gkeScopes,
      }),
    );
    return guardedNodeKube(endpointKubeConfig(google.server, google.caData), config, tokens);
  }
  return guardedNodeKube(loadKubeConfig(cluster), config);
}

/** A kubeconfig naming only the cluster (its endpoint and CA): the bearer comes from a token source. */
export function endpointKubeConfig(server: string, caData: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "cluster", server, caData, skipTLSVerify: false }],
    users: [{ name: "token-source" }],
    contexts: [{ name: "cluster", cluster: "cluster", user: "token-source" }],
    currentContext: "cluster",
  });
  return kc;
}
