/**
 * Prints the crawler token of a namespace under the API secret (`API_TOKEN`, read from the
 * environment): the credential a tenant's crawler presents to see and lease that namespace's
 * proxies only (see `namespaceToken` in shared/auth/api-credentials.ts). With a cluster name
 * (`KUBEFN_CLUSTERS`), the token is that cluster's alone (`clusterNamespaceToken`).
 *
 *   API_TOKEN=… node --import tsx scripts/crawler-token.ts team-a [east]
 */
import { clusterNamespaceToken, namespaceToken } from "../shared/controllers/proxy/discovery/index.ts";
import { isNamespaceName } from "../shared/kube/index.ts";

const namespace = process.argv[2] ?? "";
const cluster = process.argv[3];
const secret = process.env.API_TOKEN ?? process.env.KUBEFN_API_TOKEN ?? "";
if (
  !isNamespaceName(namespace) ||
  (cluster !== undefined && !isNamespaceName(cluster)) ||
  secret === "" ||
  secret.trim().startsWith("[")
) {
  console.error(
    "usage: API_TOKEN=<the plain API secret> node --import tsx scripts/crawler-token.ts <namespace> [<cluster>]",
  );
  process.exit(2);
}
console.log(
  cluster === undefined
    ? await namespaceToken(secret.trim(), namespace)
    : await clusterNamespaceToken(secret.trim(), cluster, namespace),
);
