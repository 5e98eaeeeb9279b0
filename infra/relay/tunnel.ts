/**
 * The relay's end of the API tunnel (shared/tunnel/protocol.ts): an outbound WebSocket to the
 * Worker's `/v1/tunnel`, down which the Worker sends its API requests, signed; each one admitted
 * is sent to this relay's API server over the cluster's TLS with the Worker's own bearer token,
 * and the answer goes back up. The relay adds no credential: RBAC applies to kubefn's identity.
 */
import { readFileSync } from "node:fs";
import type { KubeConfig } from "@kubernetes/client-node";
import { Agent, fetch as undiciFetch } from "undici";
import { memoryReplayGuard } from "../../shared/auth/index.ts";
import type { Log } from "../../shared/runtime/index.ts";
import {
  admitTunnelRequest,
  signTunnelOpening,
  TUNNEL_SKEW_SECONDS,
  type TunnelRequest,
  type TunnelResponse,
} from "../../shared/tunnel/index.ts";

/** Sends one admitted request to the API server and returns its answer. */
export type ApiForward = (request: TunnelRequest) => Promise<Omit<TunnelResponse, "type" | "id">>;

/** The headers of an API answer the Worker's transport reads. */
const answerHeaders = ["content-type", "retry-after", "warning"];

/**
 * Forwards to `server` (the kubeconfig's or the Pod's API server), trusting `ca` (PEM) alone,
 * without following redirects, with only the request's own headers (its bearer among them).
 */
export function apiForward(server: string, ca: string | undefined, timeoutMs = 60_000): ApiForward {
  const base = server.replace(/\/+$/, "");
  const dispatcher = new Agent({ connect: ca ? { ca } : {} });
  return async (r) => {
    const res = await undiciFetch(`${base}${r.path}`, {
      method: r.method,
      headers: r.headers,
      ...(r.body !== undefined ? { body: r.body } : {}),
      dispatcher,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
    const headers: Record<string, string> = {};
    for (const name of answerHeaders) {
      const value = res.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    return { status: res.status, headers, body: await res.text() };
  };
}

/** The API server and CA (PEM) of a kubeconfig's current cluster. */
export function apiServerOf(kc: KubeConfig): { server: string; ca: string | undefined } {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig names no current cluster");
  const ca = cluster.caData
    ? Buffer.from(cluster.caData, "base64").toString("utf8")
    : cluster.caFile
      ? readFileSync(cluster.caFile, "utf8")
      : undefined;
  return { server: cluster.server, ca };
}

export interface ApiTunnelOptions {
  /** The Worker's tunnel URL, e.g. `wss://kubefn.example.com/v1/tunnel`. */
  url: string;
  /** The HMAC secret shared with the Worker (`RELAY_SECRET`). */
  secret: string;
  forward: ApiForward;
  log: Log;
  /** Reconnect delays: from `minMs`, doubling to `maxMs`. */
  backoff?: { minMs: number; maxMs: number };
}

export interface ApiTunnel {
  /** Resolves once a socket is open (for tests and the first log line). */
  opened(): Promise<void>;
  stop(): void;
}

/**
 * Keeps one tunnel open to the Worker, reopening it (a fresh signed opening each time) after a
 * close, with backoff. Each request frame is admitted or refused ({@link admitTunnelRequest}, and
 * an id seen before is a replay), then answered on the same socket.
 */
export function startApiTunnel(options: ApiTunnelOptions): ApiTunnel {
  const { minMs, maxMs } = options.backoff ?? { minMs: 500, maxMs: 30_000 };
  const seen = memoryReplayGuard(10_000);
  let socket: WebSocket | undefined;
  let stopped = false;
  let delay = minMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let markOpen: () => void = () => undefined;
  const firstOpen = new Promise<void>((resolve) => {
    markOpen = resolve;
  });

  const answer = (ws: WebSocket, frame: TunnelResponse) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
  };

  const handle = async (ws: WebSocket, data: unknown) => {
    let frame: unknown;
    try {
      frame = JSON.parse(String(data));
    } catch {
      options.log.warn("tunnel frame refused", { reason: "malformed" });
      return;
    }
    const now = Date.now() / 1000;
    const { verdict, request } = await admitTunnelRequest(options.secret, frame, now);
    const id = typeof (frame as { id?: unknown })?.id === "string" ? (frame as { id: string }).id : "";
    if (!verdict.ok || !request) {
      options.log.warn("tunnel request refused", { reason: verdict.ok ? "malformed" : verdict.reason });
      answer(ws, {
        type: "response",
        id,
        status: 403,
        headers: {},
        body: "",
        refused: verdict.ok ? "malformed" : verdict.reason,
      });
      return;
    }
    if (seen.claim(request.id, request.time + 2 * TUNNEL_SKEW_SECONDS, now) !== "claimed") {
      options.log.warn("tunnel request refused", { reason: "replayed" });
      answer(ws, { type: "response", id, status: 409, headers: {}, body: "", refused: "replayed" });
      return;
    }
    seen.confirm(request.id);
    try {
      answer(ws, { type: "response", id, ...(await options.forward(request)) });
    } catch (err) {
      options.log.warn("tunnel request failed", { error: err instanceof Error ? err.message : String(err) });
      answer(ws, { type: "response", id, status: 502, headers: {}, body: "" });
    }
  };

  const connect = async () => {
    if (stopped) return;
    const query = await signTunnelOpening(options.secret, Date.now() / 1000, crypto.randomUUID());
    const ws = new WebSocket(`${options.url}?${query}`);
    socket = ws;
    ws.addEventListener("open", () => {
      delay = minMs;
      options.log.info("tunnel open", { url: options.url });
      markOpen();
    });
    ws.addEventListener("message", (event) => void handle(ws, event.data));
    ws.addEventListener("close", (event) => {
      if (socket === ws) socket = undefined;
      if (stopped) return;
      options.log.warn("tunnel closed", { code: event.code, retryInMs: delay });
      timer = setTimeout(() => void connect(), delay);
      delay = Math.min(maxMs, delay * 2);
    });
    // An error is followed by close, which reconnects.
    ws.addEventListener("error", () => undefined);
  };
  void connect();

  return {
    opened: () => firstOpen,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      socket?.close(1000, "relay stopping");
    },
  };
}
