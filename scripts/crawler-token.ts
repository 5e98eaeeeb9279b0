/**
 * Prints the crawler token of a namespace under the API secret (`API_TOKEN`, read from the
 * environment): the credential a tenant's crawler presents to see and lease that namespace's
 * proxies only (see `namespaceToken` in shared/auth/api-credentials.ts).
 *
 *   API_TOKEN=… node --import tsx scripts/crawler-token.ts team-a
 */
import { namespaceToken } from "../shared/controllers/proxy/discovery/index.ts";
import { isNamespaceName } from "../shared/kube/index.ts";

const namespace = process.argv[2] ?? "";
const secret = process.env.API_TOKEN ?? process.env.KUBEFN_API_TOKEN ?? "";
if (!isNamespaceName(namespace) || secret === "" || secret.trim().startsWith("[")) {
  console.error(
    "usage: API_TOKEN=<the plain API secret> node --import tsx scripts/crawler-token.ts <namespace>",
  );
  process.exit(2);
}
console.log(await namespaceToken(secret.trim(), namespace));
