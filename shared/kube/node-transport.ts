import type * as https from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { errors, Pool } from "undici";
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
  /**
   * How requests reach the server: "http1" (default) HTTP/1.1 keep-alive connections, one per
   * concurrent request, never pipelined; "h2" offers HTTP/2 in the TLS handshake (ALPN) and
   * multiplexes concurrent requests as streams of one connection, as client-go does (a server
   * that does not take it, or plain HTTP, gets HTTP/1.1). On the fleet bench HTTP/1.1 spent less
   * CPU per pass and answered faster; HTTP/2 held 1 connection where HTTP/1.1 held ~40
   * (docs/performance.md, "kube transport").
   */
  http?: NodeTransportHttp;
  /**
   * Most connections open to one server at once, default unlimited (HTTP/1.1 opens one per
   * concurrent request; HTTP/2 needs one until a connection carries the server's stream limit).
   */
  maxConnections?: number;
}

export type NodeTransportHttp = "http1" | "h2";

/** TLS material for one server, as client-node's `applyToHTTPSOptions` reads it from the kubeconfig. */
interface TlsMaterial {
  ca?: https.RequestOptions["ca"];
  cert?: https.RequestOptions["cert"];
  key?: https.RequestOptions["key"];
  pfx?: https.RequestOptions["pfx"];
  passphrase?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
}

/** One request as a {@link Connection} sends it: credentials applied, headers final. */
interface Exchange {
  url: URL;
  method: TransportRequest["method"];
  headers: Record<string, string>;
  body: string | undefined;
  tls: TlsMaterial;
  signal: AbortSignal;
}

/** Carries exchanges to the server: a connection pool, whatever the protocol. */
interface Connection {
  send(exchange: Exchange): Promise<TransportResponse>;
}

/**
 * A {@link Transport} authenticated by a kubeconfig: bearer tokens, client certificates, exec
 * plugins and OIDC through `@kubernetes/client-node`, TLS with the cluster's CA, over undici's
 * connection pool (HTTP/1.1, or HTTP/2 when asked). Node-only: keep it out of the Workers bundle.
 *
 * Credentials are applied per request (`kc.applyToHTTPSOptions`), so expiring exec/OIDC tokens are
 * refreshed (client-node re-runs an exec plugin once its `expirationTimestamp` has passed). A 401
 * is answered once: an exec plugin is run again (client-node alone would keep the refused
 * credential until its expiry), a `tokenSource` (whose token is then the bearer) is asked to
 * renew; the request is sent once more with what they give.
 *
 * Connections are kept alive and reused (client-node's own agent is built with Node's default
 * `keepAlive: false`, which pays a TCP and TLS handshake on every request). HTTP/1.1 (the default)
 * opens one connection per concurrent request and never pipelines; with HTTP/2 concurrent
 * requests are streams of one connection, as client-go sends them. A pool is kept per server and
 * TLS material (CA, client certificate, key, server name): a rotated client certificate gets a new
 * pool, and the old one closes once its requests are answered.
 *
 * Caveats: client-node refuses plain-HTTP servers unless the cluster sets
 * `insecure-skip-tls-verify`; use `createFetchTransport` for a plain-HTTP endpoint. A request that
 * finds its reused connection closed by the server (before any response) is sent once more on a
 * new one. A kubeconfig's `proxy-url` is not followed (nor was it by the node:https agent before).
 * undici's pool hands a connection back a tick after its response ends, so a request sent at once
 * after another may open a second connection.
 *
 * @example
 * const kube = createKube(createNodeTransport(loadKubeConfig({ file: process.env.KUBECONFIG })));
 */
export function createNodeTransport(initial: KubeConfig, options: NodeTransportOptions = {}): Transport {
  const idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
  const connection = undiciConnection({
    http2: options.http === "h2",
    idleTimeoutMs,
    ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
  });
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
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(opts.headers ?? {})) {
      const lower = name.toLowerCase();
      if (value === undefined || (token !== undefined && lower === "authorization")) continue;
      headers[lower] = Array.isArray(value) ? value.join(", ") : String(value);
    }
    if (opts.auth && headers.authorization === undefined && token === undefined) {
      headers.authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
    }
    headers.accept = req.accept ?? "application/json";
    headers["user-agent"] = "kubefn";
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (req.contentType) headers["content-type"] = req.contentType;
    return connection.send({
      url: new URL(`${cluster.server.replace(/\/+$/, "")}${req.path}`),
      method: req.method,
      headers,
      body: req.body,
      tls: tlsOf(opts),
      signal,
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

function tlsOf(opts: https.RequestOptions): TlsMaterial {
  const tls: TlsMaterial = {};
  if (opts.ca !== undefined) tls.ca = opts.ca;
  if (opts.cert !== undefined) tls.cert = opts.cert;
  if (opts.key !== undefined) tls.key = opts.key;
  if (opts.pfx !== undefined) tls.pfx = opts.pfx;
  if (opts.passphrase !== undefined) tls.passphrase = opts.passphrase;
  if (opts.rejectUnauthorized !== undefined) tls.rejectUnauthorized = opts.rejectUnauthorized;
  if (opts.servername !== undefined) tls.servername = opts.servername;
  return tls;
}

/** Whether two TLS materials are the same: by content (client-node decodes them anew per request). */
function sameTls(a: TlsMaterial, b: TlsMaterial): boolean {
  return (
    a.rejectUnauthorized === b.rejectUnauthorized &&
    a.servername === b.servername &&
    a.passphrase === b.passphrase &&
    samePem(a.ca, b.ca) &&
    samePem(a.cert, b.cert) &&
    samePem(a.key, b.key) &&
    samePem(a.pfx, b.pfx)
  );
}

function samePem(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => samePem(v, b[i]));
  return typeof a === "string" && typeof b === "string" ? a === b : false;
}

/**
 * undici pools, one per server origin, rebuilt when the TLS material changes. Pipelining stays
 * off (one request at a time on an HTTP/1.1 connection, as the API server expects of a client).
 */
function undiciConnection(opts: {
  http2: boolean;
  idleTimeoutMs: number;
  maxConnections?: number;
}): Connection {
  const pools = new Map<string, { tls: TlsMaterial; pool: Pool }>();

  function poolFor(url: URL, tls: TlsMaterial): Pool {
    const held = pools.get(url.origin);
    if (held && sameTls(held.tls, tls)) return held.pool;
    // New TLS material (a rotated client certificate): the old pool finishes what it carries.
    if (held) void held.pool.close().catch(() => {});
    const pool = new Pool(url.origin, {
      connect: { ...tls } as Pool.Options["connect"],
      allowH2: opts.http2,
      pipelining: 1,
      keepAliveTimeout: opts.idleTimeoutMs,
      keepAliveMaxTimeout: opts.idleTimeoutMs,
      // The transport's deadline (an abort signal) bounds every request, body included.
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(opts.maxConnections !== undefined ? { connections: opts.maxConnections } : {}),
    });
    pools.set(url.origin, { tls, pool });
    return pool;
  }

  async function sendOnce(x: Exchange): Promise<TransportResponse> {
    const res = await poolFor(x.url, x.tls).request({
      path: `${x.url.pathname}${x.url.search}`,
      method: x.method,
      headers: x.headers,
      body: x.body ?? null,
      signal: x.signal,
    });
    const body = await res.body.text();
    const headers = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    return { status: res.statusCode, headers, body };
  }

  return {
    send(x) {
      return sendOnce(x).catch((err: unknown) => {
        if (!isStaleConnection(err)) throw err;
        return sendOnce(x);
      });
    },
  };
}

/**
 * The server closed a connection that had already carried a response, before answering this
 * request on it (its idle timeout raced our reuse): safe to send once more on a new one.
 */
function isStaleConnection(err: unknown): boolean {
  return err instanceof errors.SocketError && (err.socket?.bytesRead ?? 0) > 0;
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
  http?: NodeTransportHttp,
): GuardedKube {
  const options = {
    timeoutMs: settings.kubeTimeoutMs,
    ...(tokenSource ? { tokenSource } : {}),
    ...(http ? { http } : {}),
  };
  return guardedKube(createNodeTransport(kc, options), settings);
}
