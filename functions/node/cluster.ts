import type { KubeConfig } from "@kubernetes/client-node";
import type { Transport } from "../../shared/kube/index.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Log } from "../../shared/runtime/index.ts";
import type { NodeHostConfig } from "./config.ts";
import { type Devcluster, startDevclusterAsKubefn } from "./dev/index.ts";
import { allowListEntriesFor, applyAllowLists, installCrdsAndRbac } from "./install.ts";

/**
 * The Node host's cluster: the given one (installing CRDs, RBAC and the allow-lists its settings
 * need, if asked), or the embedded devcluster with its audit webhook pointed at `url`, as kubefn's
 * least-privileged `kubefn-system/kubefn` ServiceAccount.
 */
export async function connectCluster(
  config: NodeHostConfig,
  url: string,
  auditToken: string | undefined,
  log: Log,
): Promise<{ kc: KubeConfig; devcluster?: Devcluster }> {
  if (config.kubeconfig) {
    const kc = loadKubeConfig({ file: config.kubeconfig });
    if (config.install) {
      const kube = createKube(createNodeTransport(kc));
      log.info("installed", await installCrdsAndRbac(kube));
      await applyAllowLists(kube, allowListEntriesFor(config.settings.operators));
    }
    await reportIdentity(createNodeTransport(kc), config.settings.selfUsernames, log);
    return { kc };
  }
  return startDevclusterAsKubefn(
    `${url}/v1/events`,
    auditToken,
    log,
    allowListEntriesFor(config.settings.operators),
  );
}

/** A fresh bearer token for the embedded devcluster's audit webhook (48 hex digits). */
export function randomToken(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}

/**
 * Says whom a given kubeconfig reconciles as (a SelfSubjectReview), and warns when that is not an
 * identity of `SELF_USERNAMES`: then neither the admission policy (bound to kubefn's
 * ServiceAccount) limits its writes nor does intake drop their audit events, each of which comes
 * back as one more pass.
 *
 * Caveats: a cluster that refuses the review (before v1.28, or without `system:basic-user`) gets
 * a warning, not a refusal to start.
 */
export async function reportIdentity(transport: Transport, selfUsernames: readonly string[], log: Log) {
  const res = await transport
    .request({
      method: "POST",
      path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
      contentType: "application/json",
      body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
    })
    .catch((err: unknown) => ({ status: 0, body: String(err) }));
  const username =
    res.status === 201 || res.status === 200
      ? (JSON.parse(res.body) as { status?: { userInfo?: { username?: string } } }).status?.userInfo?.username
      : undefined;
  if (username === undefined) {
    log.warn("could not tell whom the kubeconfig reconciles as (SelfSubjectReview)", { status: res.status });
    return;
  }
  log.info(`reconciling as ${username}`);
  if (!selfUsernames.includes(username)) {
    log.warn(
      "this identity is not in SELF_USERNAMES: the admission policy does not limit its writes, each write comes back as an event, and its status writes are refused unless ConfigMap kubefn-system/kubefn-status-writers lists it; use a kubeconfig for kubefn-system/kubefn (docs/deploying/node.md)",
      { username, selfUsernames: selfUsernames.join(",") },
    );
  }
}
