import type {
  WebSocket as CfWebSocket,
  WebSocketPair as CfWebSocketPair,
  DurableObjectNamespace,
  DurableObjectState,
} from "@cloudflare/workers-types/index.ts";
import { memoryReplayGuard } from "../../shared/auth/index.ts";
import {
  signTunnelRequest,
  TUNNEL_HEADERS,
  TUNNEL_PATH,
  TUNNEL_SKEW_SECONDS,
  type TunnelResponse,
  verifyTunnelOpening,
} from "../../shared/tunnel/index.ts";

/** The one Durable Object every isolate's API requests meet the relay's socket in. */
const TUNNEL_OBJECT = "kube-api";

/** Longest an API request waits for the relay's answer (the transport's own deadline is shorter). */
const ANSWER_TIMEOUT_MS = 60_000;

/**
 * A request waiting for its answer. The answer is kept as data: a Response made in the socket's
 * message handler could not be returned from the request's own (workerd ties I/O objects to the
 * request that made them).
 */
interface Pending {
  resolve(answer: Pick<TunnelResponse, "status" | "headers" | "body"> | undefined): void;
  timer: ReturnType<typeof setTimeout>;
}

const status = (code: number, message: string) =>
  Response.json(
    { kind: "Status", apiVersion: "v1", status: "Failure", message, reason: "ServiceUnavailable", code },
    { status: code },
  );

/**
 * The Durable Object `KubeTunnel` (binding `KUBEFN_TUNNEL`): holds the WebSocket the in-cluster
 * relay opened (`GET /v1/tunnel`, its opening signed with `RELAY_SECRET`, each nonce accepted
 * once), and sends each of the Worker's API requests down it, signed, answering with what the
 * relay brings back from its API server (shared/tunnel/protocol.ts).
 *
 * Caveats: while no relay is connected, every API request is answered 503 (a pass fails and is
 * retried; the sweep comes back); the socket keeps this object in memory (billed as Durable Object
 * duration while open). A second relay's socket is used from its opening on; the first stays
 * open, as a standby, until it closes.
 */
export class KubeTunnel {
  readonly #secret: string;
  readonly #sockets: CfWebSocket[] = [];
  readonly #pending = new Map<string, Pending>();
  readonly #openings = memoryReplayGuard(1000);

  constructor(_state: DurableObjectState, env: Record<string, unknown>) {
    this.#secret = typeof env.RELAY_SECRET === "string" ? env.RELAY_SECRET : "";
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === TUNNEL_PATH && request.headers.get("upgrade")?.toLowerCase() === "websocket")
      return this.#open(url);
    return this.#forward(request);
  }

  async #open(url: URL): Promise<Response> {
    if (!this.#secret) return status(503, "the Worker has no RELAY_SECRET");
    const now = Date.now() / 1000;
    const verdict = await verifyTunnelOpening(this.#secret, url.searchParams, now);
    if (!verdict.ok) return Response.json({ error: `tunnel refused: ${verdict.reason}` }, { status: 401 });
    const nonce = url.searchParams.get("nonce") ?? "";
    if (this.#openings.claim(nonce, now + 2 * TUNNEL_SKEW_SECONDS, now) !== "claimed")
      return Response.json({ error: "tunnel refused: replayed opening" }, { status: 409 });
    this.#openings.confirm(nonce);
    const Pair = (globalThis as unknown as { WebSocketPair: typeof CfWebSocketPair }).WebSocketPair;
    const pair = new Pair();
    const [client, server] = [pair[0], pair[1]];
    server.accept();
    this.#sockets.push(server);
    server.addEventListener("message", (event) => {
      if (typeof event.data !== "string") return;
      let frame: TunnelResponse;
      try {
        frame = JSON.parse(event.data) as TunnelResponse;
      } catch {
        return;
      }
      const pending = frame.type === "response" ? this.#pending.get(frame.id) : undefined;
      if (!pending) return;
      this.#pending.delete(frame.id);
      clearTimeout(pending.timer);
      pending.resolve({ status: frame.status, headers: frame.headers, body: frame.body });
    });
    const gone = () => {
      const at = this.#sockets.indexOf(server);
      if (at >= 0) this.#sockets.splice(at, 1);
    };
    server.addEventListener("close", gone);
    server.addEventListener("error", gone);
    return new Response(null, { status: 101, webSocket: client } as ResponseInit);
  }

  async #forward(request: Request): Promise<Response> {
    const socket = this.#sockets.at(-1);
    if (!socket) return status(503, "no relay is connected to the Worker's API tunnel");
    const url = new URL(request.url);
    const headers: Record<string, string> = {};
    for (const name of TUNNEL_HEADERS) {
      const value = request.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    const body = request.method === "GET" || request.method === "HEAD" ? "" : await request.text();
    const frame = await signTunnelRequest(this.#secret, {
      id: crypto.randomUUID(),
      time: Math.floor(Date.now() / 1000),
      method: request.method,
      path: `${url.pathname}${url.search}`,
      headers,
      ...(body ? { body } : {}),
    });
    const answer = new Promise<Pick<TunnelResponse, "status" | "headers" | "body"> | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.#pending.delete(frame.id);
        resolve(undefined);
      }, ANSWER_TIMEOUT_MS);
      this.#pending.set(frame.id, { resolve, timer });
    });
    try {
      socket.send(JSON.stringify(frame));
    } catch {
      const pending = this.#pending.get(frame.id);
      if (pending) clearTimeout(pending.timer);
      this.#pending.delete(frame.id);
      return status(503, "the relay's tunnel closed");
    }
    const got = await answer;
    if (!got) return status(504, "the relay did not answer");
    return new Response(got.body, { status: got.status, headers: got.headers });
  }
}

/**
 * The `KubeTunnel` object every isolate shares. A stub is made per call: an isolate's parts are
 * cached across requests, and workerd ties a stub to the request that made it.
 */
export function tunnelObject(binding: DurableObjectNamespace): {
  fetch(request: Request): Promise<Response>;
} {
  return {
    fetch: (request) =>
      binding.get(binding.idFromName(TUNNEL_OBJECT)).fetch(request as never) as unknown as Promise<Response>,
  };
}

/**
 * A `fetch` for the kube transport that sends every request to the tunnel object (its deadline
 * signal stays behind: a signal does not cross into a Durable Object; the object has its own).
 */
export function tunnelFetch(binding: DurableObjectNamespace): typeof fetch {
  const tunnel = tunnelObject(binding);
  return (input, init) => {
    const { signal: _signal, ...rest } = init ?? {};
    return tunnel.fetch(new Request(input, rest));
  };
}
