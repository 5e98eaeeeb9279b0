import { KubeConfig } from "@kubernetes/client-node";
import {
  type Clock,
  type ClusterDeclaration,
  createServiceAccountTokenSource,
  gkeScopes,
  issuerTokenSource,
  type KubefnSettings,
  kubeTokenSourceFrom,
  parseServiceAccountKey,
  type ServiceAccountKey,
} from "../../shared/app/index.ts";
import { assertNever } from "../../shared/guards/index.ts";
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
    return guardedNodeKube(
      endpointKubeConfig(google.server, google.caData),
      config,
      googleTokens(google.key, from),
    );
  }
  return guardedNodeKube(loadKubeConfig(cluster), config);
}

/**
 * A declared cluster's Kube (`KUBEFN_CLUSTERS`), as its credential says to reach it: a bearer; a
 * kubeconfig file in the bundle; EKS tokens for its `clusterName` and `region`, minted from the
 * function's role; a Google service account's tokens; or JWTs kubefn signs as its own OIDC issuer
 * with the cluster's audience. Its CA is the declared `ca`, else the system's roots.
 *
 * @throws Error for `in-cluster` (refused at parse already: a function runs in no Pod).
 */
export function declaredClusterKube(
  declared: ClusterDeclaration,
  settings: KubefnSettings,
  from: {
    env: Record<string, string | undefined>;
    clock: Clock;
    eksRenewAfterMs: number;
    fetch?: typeof fetch;
  },
): GuardedKube {
  const { credential } = declared;
  const caData = declared.ca ? Buffer.from(declared.ca).toString("base64") : undefined;
  const endpoint = (token?: string) => endpointKubeConfig(declared.server ?? "", caData, token);
  switch (credential.kind) {
    case "token":
      return guardedNodeKube(endpoint(credential.token), settings);
    case "kubeconfig":
      return guardedNodeKube(
        loadKubeConfig({
          file: credential.file,
          ...(credential.context ? { context: credential.context } : {}),
        }),
        settings,
      );
    case "eks": {
      const tokens = eksTokenSource({
        clusterName: credential.clusterName,
        region: credential.region,
        credentials: lambdaRoleCredentials(from.env),
        renewAfterMs: from.eksRenewAfterMs,
        now: () => from.clock.now().getTime(),
      });
      return guardedNodeKube(endpoint(), settings, tokens);
    }
    case "google":
      return guardedNodeKube(
        endpoint(),
        settings,
        googleTokens(parseServiceAccountKey(credential.key) as ServiceAccountKey, from),
      );
    case "oidc-issuer": {
      // `clusterSettings` gave this cluster's settings its own audience.
      const oidc = settings.oidcIssuer;
      if (!oidc)
        throw new Error(`cluster ${declared.name}: oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY`);
      return guardedNodeKube(
        endpoint(),
        settings,
        issuerTokenSource(oidc, () => from.clock.now().getTime() / 1000),
      );
    }
    case "in-cluster":
      throw new Error(
        `cluster ${declared.name}: in-cluster cannot be used on Lambda (a function runs in no Pod)`,
      );
    default:
      return assertNever(credential);
  }
}

/** A Google service account's access tokens (GKE), exchanged and renewed by its token source. */
function googleTokens(key: ServiceAccountKey, from: { clock: Clock; fetch?: typeof fetch }): TokenSource {
  return kubeTokenSourceFrom(
    createServiceAccountTokenSource({
      key,
      fetch: from.fetch ?? ((input, init) => fetch(input, init)),
      clock: from.clock,
      scope: gkeScopes,
    }),
  );
}

/**
 * A kubeconfig naming only the cluster (its endpoint and CA, the system's roots without one): the
 * bearer is `token`, or comes from a token source.
 */
export function endpointKubeConfig(server: string, caData: string | undefined, token?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "cluster", server, ...(caData ? { caData } : {}), skipTLSVerify: false }],
    users: [{ name: "token-source", ...(token ? { token } : {}) }],
    contexts: [{ name: "cluster", cluster: "cluster", user: "token-source" }],
    currentContext: "cluster",
  });
  return kc;
}
