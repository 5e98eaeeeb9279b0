import { readFileSync } from "node:fs";
import { isIPv6 } from "node:net";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { tokenFileSource } from "./node-token-file.ts";
import type { TokenSource } from "./token-source.ts";

/** Where the kubelet mounts a Pod's ServiceAccount token, CA bundle and namespace. */
export const defaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

export interface InClusterOptions {
  /** `KUBERNETES_SERVICE_HOST`: the API server's address as the Pod sees it. */
  host: string;
  /** `KUBERNETES_SERVICE_PORT`, default 443. */
  port?: number;
  /** Holds `token`, `ca.crt` and `namespace`; default {@link defaultServiceAccountDir}. */
  serviceAccountDir?: string;
}

/** A Pod's way to its cluster: the API server, trusted through `ca.crt`, as the Pod's ServiceAccount. */
export interface InClusterConnection {
  /**
   * The cluster and its CA, its user authenticated by `tokenSource` (so client-node's own
   * clients and watches follow the rotation too; only the transport also renews after a 401).
   */
  kc: KubeConfig;
  tokenSource: TokenSource;
  /** The Pod's namespace, from the `namespace` file. */
  namespace: string;
  server: string;
}

/**
 * The in-cluster connection of a Node process in a Pod, for {@link createNodeTransport} with its
 * `tokenSource`: the token file is watched and re-read as the kubelet rotates it, and once more
 * after a 401 ({@link tokenFileSource}). client-node reads the CA file per request, so a rotated CA
 * bundle is picked up too.
 *
 * Caveats: HTTPS always (client-node's `loadFromCluster` switches to plain HTTP on ports 80, 8080
 * and 8001; an API server never serves a Pod there). The token is not read here: a missing token
 * fails the first request, with the file's name.
 *
 * @throws when `namespace` cannot be read (no ServiceAccount volume mounted).
 */
export function inClusterConnection(options: InClusterOptions): InClusterConnection {
  const dir = options.serviceAccountDir ?? defaultServiceAccountDir;
  const host = isIPv6(options.host) ? `[${options.host}]` : options.host;
  const server = `https://${host}:${options.port ?? 443}`;
  const namespace = readFileSync(join(dir, "namespace"), "utf8").trim();
  const tokenSource = tokenFileSource(join(dir, "token"));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "in-cluster", server, caFile: join(dir, "ca.crt"), skipTLSVerify: false }],
    users: [{ name: "service-account", authProvider: { name: tokenSourceProvider, config: {} } }],
    contexts: [{ name: "in-cluster", cluster: "in-cluster", user: "service-account", namespace }],
    currentContext: "in-cluster",
  });
  kc.addAuthenticator({
    isAuthProvider: (user) => user.authProvider?.name === tokenSourceProvider,
    async applyAuthentication(_user, opts) {
      opts.headers = { ...opts.headers, Authorization: `Bearer ${await tokenSource.token()}` };
    },
  });
  return { kc, tokenSource, namespace, server };
}

/** The auth-provider name of a kubeconfig user whose token comes from a {@link TokenSource}; no built-in provider claims it. */
const tokenSourceProvider = "kubefn-token-source";
