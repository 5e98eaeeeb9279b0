import * as http from "node:http";
import * as https from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { type CircuitPolicy, type GuardedKube, guardedKube } from "./back-pressure.ts";
import { requestDeadline } from "./deadline.ts";
import type { Transport, TransportRequest, TransportResponse } from "./port.ts";
import type { TokenSource } from "./token-source.ts";

export interface NodeTransportOptions {
  /** Per-request deadline, default 30 s. */
  timeoutMs?: number;
  /**
   * How long an idle connection is kept for the next request, default 30 s (below the API
   * server's idle timeout, so the server rarely closes a connection the client is about to reuse).
   */
  idleTimeoutMs?: number;
  /**
   * The bearer token per request, in place of the kubeconfig user's credentials (an in-cluster
   * ServiceAccount token file, a minted cloud token); a 401 asks it for a fresh token and sends
   * the request once more with it.
   */
  tokenSource?: TokenSource;
}

/**
 * A {@link Transport} authenticated by a kubeconfig: bearer tokens, client certificates, exec
 * plugins and OIDC through `@kubernetes/client-node`, TLS with the cluster's CA, over node:https.
 * Node-only: keep it out of the Workers bundle.
 *
 * Credentials are applied per request (`kc.applyToHTTPSOptions`), so expiring exec/OIDC tokens are
 * refreshed (client-node re-runs an exec plugin once its `expirationTimestamp` has passed). A 401
 * is answered once: an exec plugin is run again (client-node alone would keep the refused
 * credential until its expiry), a `tokenSource` (whose token is then the bearer) is asked to
 * renew; the request is sent once more with what they give.
 *
 * Connections are kept alive and reused: client-node's own agent is built with
 * Node's default `keepAlive: false`, which pays a TCP and TLS handshake on every request, so the
 * transport brings its own keep-alive agent. Node pools its connections by TLS material (CA,
 * client certificate, key, server name), so a rotated client certificate gets a new connection.
 *
 * Caveats: client-node refuses plain-HTTP servers unless the cluster sets
 * `insecure-skip-tls-verify`; use `createFetchTransport` for a plain-HTTP endpoint. A request that
 * finds its reused connection closed by the server (ECONNRESET before any response) is sent once
 * more on a new one.
 *
 * @example
 * const kube = createKube(createNodeTransport(loadKubeConfig({ file: process.env.KUBECONFIG })));
 */
export function createNodeTransport(initial: KubeConfig, options: NodeTransportOptions = {}): Transport {
  const agentOptions = { keepAlive: true, timeout: options.idleTimeoutMs ?? 30_000 };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };
  let kc = initial;

  /** Sends `req` with the credentials `from` applies now, `token` (when given) as the bearer. */
  async function sendWith(
    from: KubeConfig,
    req: TransportRequest,
    signal: AbortSignal,
    token?: string,
  ): Promise<TransportResponse> {
    const cluster = from.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster");
    const opts: https.RequestOptions = {};
    await from.applyToHTTPSOptions(opts);
    const url = new URL(`${cluster.server.replace(/\/+$/, "")}${req.path}`);
    const headers: http.OutgoingHttpHeaders = {
      ...withoutAuthorization(opts.headers as http.OutgoingHttpHeaders | undefined, token !== undefined),
      accept: req.accept ?? "application/json",
      "user-agent": "kubefn",
    };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (req.contentType) headers["content-type"] = req.contentType;
    if (req.body !== undefined) headers["content-length"] = Buffer.byteLength(req.body);
    const agent = url.protocol === "http:" ? agents.http : agents.https;
    const sendOpts = { ...opts, agent, method: req.method, headers, signal };
    return send(url, sendOpts, req.body).catch((err: unknown) => {
      if (!(err instanceof StaleConnectionError)) throw err;
      return send(url, sendOpts, req.body);
    });
  }

  return {
    async request(req: TransportRequest): Promise<TransportResponse> {
      const deadline = requestDeadline(req, options.timeoutMs);
      try {
        const used = kc;
        const source = options.tokenSource;
        const token = await source?.token();
        const res = await sendWith(used, req, deadline.signal, token);
        if (res.status !== 401) return res;
        if (source && token !== undefined) {
          const renewed = await source.renew(token);
          return renewed === undefined ? res : await sendWith(used, req, deadline.signal, renewed);
        }
        if (!runsExecPlugin(used)) return res;
        // client-node keeps an exec credential until its expirationTimestamp, refused or not; a new
        // KubeConfig starts with none, so its plugin runs again (as client-go does on a 401).
        if (kc === used) kc = withoutCachedCredentials(used);
        return await sendWith(kc, req, deadline.signal);
      } catch (err) {
        throw deadline.failure(err);
      }
    },
  };
}

function withoutAuthorization(
  headers: http.OutgoingHttpHeaders | undefined,
  drop: boolean,
): http.OutgoingHttpHeaders {
  if (!headers || !drop) return { ...headers };
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => name.toLowerCase() !== "authorization"),
  );
}

/** Whether the current user's credentials come from an exec plugin. */
function runsExecPlugin(kc: KubeConfig): boolean {
  const user = kc.getCurrentUser();
  return Boolean(user?.exec || user?.authProvider?.name === "exec" || user?.authProvider?.config?.exec);
}

/** The same clusters, users and contexts in a new KubeConfig, whose authenticators have cached nothing. */
function withoutCachedCredentials(kc: KubeConfig): KubeConfig {
  const fresh = new KubeConfig();
  fresh.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.getCurrentContext(),
  });
  return fresh;
}

/** A reused keep-alive connection the server had already closed: safe to send again. */
class StaleConnectionError extends Error {}

function send(url: URL, opts: https.RequestOptions, body: string | undefined): Promise<TransportResponse> {
  const client = url.protocol === "http:" ? http : https;
  return new Promise((resolve, reject) => {
    let responded = false;
    const request = client.request(url, opts, (res) => {
      responded = true;
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
        }
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString("utf8") });
      });
    });
    request.on("error", (err: NodeJS.ErrnoException) => {
      const stale = request.reusedSocket && !responded && err.code === "ECONNRESET";
      reject(stale ? new StaleConnectionError(err.message, { cause: err }) : err);
    });
    request.end(body);
  });
}

export interface LoadKubeConfigOptions {
  /** A kubeconfig file. */
  file?: string;
  /** A kubeconfig's text (e.g. an inline one from the environment); wins over `file`. */
  yaml?: string;
  /**
   * Use the pod's service account (token, CA and namespace under /var/run/secrets).
   *
   * Caveats: client-node reads the token file once a minute whatever happens, so a revoked token
   * fails every request for up to 60 s; `inClusterConnection` follows the file and renews
   * on a 401.
   */
  inCluster?: boolean;
  /** Context to select instead of the file's current-context. */
  context?: string;
}

/**
 * Loads a kubeconfig: from `yaml` text, from `file`, from the in-cluster service account, or client-node's default
 * search ($KUBECONFIG, ~/.kube/config, then in-cluster) when neither is given. Adapters call this
 * once at startup and pass the result to {@link createNodeTransport}.
 */
export function loadKubeConfig(options: LoadKubeConfigOptions = {}): KubeConfig {
  const kc = new KubeConfig();
  if (options.yaml !== undefined) kc.loadFromString(options.yaml);
  else if (options.file) kc.loadFromFile(options.file);
  else if (options.inCluster) kc.loadFromCluster();
  else kc.loadFromDefault();
  if (options.context) kc.setCurrentContext(options.context);
  return kc;
}

/**
 * The Kube of a Node platform (the Node host, Lambda): `guardedKube` over a Node transport to the
 * cluster `kc` names (authenticated by `tokenSource` when given), with the settings' per-request
 * deadline, request budget and circuit.
 */
export function guardedNodeKube(
  kc: KubeConfig,
  settings: { kubeTimeoutMs: number; requestBudget: number; circuit: CircuitPolicy },
  tokenSource?: TokenSource,
): GuardedKube {
  const options = { timeoutMs: settings.kubeTimeoutMs, ...(tokenSource ? { tokenSource } : {}) };
  return guardedKube(createNodeTransport(kc, options), settings);
}
