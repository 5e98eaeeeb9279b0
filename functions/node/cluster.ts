import type { KubeConfig } from "@kubernetes/client-node";
import type { ClusterDeclaration, Log } from "../../shared/app/index.ts";
import { issuerTokenSource, ownNamespace } from "../../shared/app/index.ts";
import { assertNever } from "../../shared/guards/index.ts";
import type { TokenSource, Transport } from "../../shared/kube/index.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, inClusterConnection, loadKubeConfig } from "../../shared/kube/node.ts";
import type { NodeHostConfig } from "./config.ts";
import { type Devcluster, startDevclusterAsKubefn } from "./dev/index.ts";
import { allowListEntriesFor, applyAllowLists, installCrdsAndRbac } from "./install.ts";

/** How the host reaches its cluster: a kubeconfig, and the token source that replaces its user. */
export interface ClusterConnection {
  kc: KubeConfig;
  /** In a Pod: the ServiceAccount token file, re-read as it rotates (and after a 401). */
  tokenSource?: TokenSource;
  /** In a Pod: its namespace (the sweep Lease's, unless the configuration names another). */
  namespace?: string;
  devcluster?: Devcluster;
}

/**
 * The Node host's cluster, installing CRDs, RBAC and the allow-lists its settings need if asked:
 * the kubeconfig's (as its identity, exec plugins and OIDC included); else, in a Pod, the Pod's
 * own, as its ServiceAccount; else the embedded devcluster with its audit webhook pointed at
 * `url`, as kubefn's least-privileged `kubefn-system/kubefn` ServiceAccount.
 */
export async function connectCluster(
  config: NodeHostConfig,
  url: string,
  auditToken: string | undefined,
  log: Log,
): Promise<ClusterConnection> {
  let connection: ClusterConnection;
  if (config.kubeconfig) connection = { kc: loadKubeConfig({ file: config.kubeconfig }) };
  else if (config.inCluster) connection = podConnection(config.inCluster, log);
  else
    return startDevclusterAsKubefn(
      `${url}/v1/events`,
      auditToken,
      log,
      allowListEntriesFor(config.settings.operators),
    );
  if (config.settings.oidcIssuer) {
    // kubefn as its own OIDC issuer: the kubeconfig's (or the Pod's) cluster and CA, its JWTs as the bearer.
    connection.tokenSource = issuerTokenSource(
      config.settings.oidcIssuer,
      () => Date.now() / 1000,
      config.renewTokens ?? true,
    );
    log.info("authenticating with kubefn's own OIDC tokens", {
      issuer: config.settings.oidcIssuer.issuer,
      subject: config.settings.oidcIssuer.subject,
    });
  }
  return prepared(connection, config, log);
}

/**
 * A declared cluster's connection (`KUBEFN_CLUSTERS`), its CRDs, RBAC and allow-lists installed if
 * asked, as {@link connectCluster} does for the one cluster of today's settings.
 *
 * @throws Error for a credential kind the Node host cannot use (refused at parse already).
 */
export async function connectDeclaredCluster(
  declared: ClusterDeclaration,
  config: NodeHostConfig,
  log: Log,
): Promise<ClusterConnection> {
  return prepared(connectionOf(declared, config, log), config, log);
}

/**
 * A discovered cluster's connection (Cluster API): a kubeconfig's text, already reduced to its
 * vetted fields (see cluster-api.ts), prepared as a declared cluster's is.
 */
export async function connectKubeconfigText(
  yaml: string,
  config: NodeHostConfig,
  log: Log,
): Promise<ClusterConnection> {
  return prepared({ kc: loadKubeConfig({ yaml }) }, config, log);
}

/**
 * How to reach a declared cluster (or the Cluster API management cluster), nothing installed
 * and nothing asked of it yet.
 *
 * @throws Error for a credential kind the Node host cannot use (refused at parse already).
 */
export function connectionOf(
  declared: Pick<ClusterDeclaration, "name" | "server" | "ca" | "credential">,
  config: NodeHostConfig,
  log: Log,
): ClusterConnection {
  const { credential } = declared;
  const endpoint = (token?: string) =>
    loadKubeConfig({ yaml: kubeconfigOf(declared.name, declared.server ?? "", declared.ca, token) });
  let connection: ClusterConnection;
  switch (credential.kind) {
    case "token":
      connection = { kc: endpoint(credential.token) };
      break;
    case "kubeconfig":
      connection = {
        kc: loadKubeConfig({
          file: credential.file,
          ...(credential.context ? { context: credential.context } : {}),
        }),
      };
      break;
    case "in-cluster":
      if (!config.inCluster)
        throw new Error(`cluster ${declared.name}: in-cluster, but this host runs in no Pod`);
      connection = podConnection(config.inCluster, log);
      break;
    case "oidc-issuer": {
      const oidc = config.settings.oidcIssuer;
      if (!oidc)
        throw new Error(`cluster ${declared.name}: oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY`);
      // Its own audience: a token minted for one cluster is refused by the next.
      connection = {
        kc: endpoint(),
        tokenSource: issuerTokenSource(
          { ...oidc, audience: credential.audience },
          () => Date.now() / 1000,
          config.renewTokens ?? true,
        ),
      };
      break;
    }
    case "google":
    case "eks":
      throw new Error(
        `cluster ${declared.name}: credential kind ${credential.kind} is not used by the Node host`,
      );
    default:
      return assertNever(credential);
  }
  return connection;
}

/** A kubeconfig of one cluster and, when given, a bearer token. */
function kubeconfigOf(
  name: string,
  server: string,
  ca: string | undefined,
  token: string | undefined,
): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name,
        cluster: {
          server,
          ...(ca ? { "certificate-authority-data": Buffer.from(ca).toString("base64") } : {}),
        },
      },
    ],
    users: [{ name, user: token ? { token } : {} }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    "current-context": name,
  });
}

/** `connection` with kubefn installed if asked, its identity said, and its own Secrets refused. */
async function prepared(
  connection: ClusterConnection,
  config: NodeHostConfig,
  log: Log,
): Promise<ClusterConnection> {
  const { kc, tokenSource } = connection;
  const transport = () =>
    createNodeTransport(kc, { http: config.kubeHttp, ...(tokenSource ? { tokenSource } : {}) });
  if (config.install) {
    const kube = createKube(transport());
    log.info("installed", await installCrdsAndRbac(kube, undefined, config.settings.selfUsernames));
    await applyAllowLists(kube, allowListEntriesFor(config.settings.operators));
  }
  const username = await reportIdentity(transport(), config.settings.selfUsernames, log);
  if (username !== undefined && config.settings.selfUsernames.includes(username)) {
    await refuseOwnSecretsAccess(transport(), ownNamespace(config.settings.selfUsernames));
  }
  return connection;
}

/**
 * Refuses to start when kubefn's identity may read the Secrets of its own namespace: its settings,
 * the status seal key, the OIDC signing key — what the seal and intake assume its token cannot
 * read. A cluster-wide binding of kubefn-tenant (the chart's `clusterWideTenantAccess`) or one in
 * that namespace grants it; asked of the API server with a SelfSubjectAccessReview (any
 * authenticated identity may). `kubefn doctor` makes the same check.
 *
 * Caveats: not for `npm start`'s embedded devcluster, which binds kubefn-tenant cluster-wide for
 * its one user: kubefn's settings there are the process's environment, no Secret of the cluster.
 *
 * @throws Error naming the grant, when the identity may get Secrets in `namespace`.
 */
export async function refuseOwnSecretsAccess(transport: Transport, namespace: string): Promise<void> {
  const res = await transport.request({
    method: "POST",
    path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    contentType: "application/json",
    body: JSON.stringify({
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb: "get", resource: "secrets", namespace } },
    }),
  });
  const allowed =
    (res.status === 200 || res.status === 201) &&
    (JSON.parse(res.body) as { status?: { allowed?: boolean } }).status?.allowed === true;
  if (allowed) {
    throw new Error(
      `kubefn's identity may get the Secrets of ${namespace}, kubefn's own (its settings, the status seal key, the OIDC signing key): bind kubefn-tenant in each tenant namespace, not cluster-wide (clusterWideTenantAccess) nor in ${namespace}; not starting`,
    );
  }
}

/** The Pod's cluster, as its ServiceAccount, said in one line. */
function podConnection(pod: NonNullable<NodeHostConfig["inCluster"]>, log: Log): ClusterConnection {
  const { kc, tokenSource, server, namespace } = inClusterConnection(pod);
  log.info("in cluster", { server, namespace, serviceAccountDir: pod.serviceAccountDir });
  return { kc, tokenSource, namespace };
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
export async function reportIdentity(
  transport: Transport,
  selfUsernames: readonly string[],
  log: Log,
): Promise<string | undefined> {
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
    return undefined;
  }
  log.info(`reconciling as ${username}`);
  if (!selfUsernames.includes(username)) {
    log.warn(
      "this identity is not in SELF_USERNAMES: the admission policy does not limit its writes, each write comes back as an event, and its status writes are refused unless ConfigMap kubefn-system/kubefn-status-writers lists it; use a kubeconfig for kubefn-system/kubefn (docs/deploying/node.md)",
      { username, selfUsernames: selfUsernames.join(",") },
    );
  }
  return username;
}
