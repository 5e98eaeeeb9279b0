import { requestDeadline } from "./deadline.ts";
import type { Transport, TransportRequest, TransportResponse } from "./port.ts";
import type { TokenSource } from "./token-source.ts";

export interface FetchTransportOptions {
  /** API server base URL, e.g. "https://kube.example.com" (a path prefix is kept). */
  server: string;
  /** Bearer token, or a function returning the current one (called per request, for rotation). */
  token?: string | (() => string | Promise<string>);
  /**
   * In place of `token`: a source of short-lived tokens (a Google access token, ...); a 401 asks
   * it for a fresh one and the request is sent once more with it.
   */
  tokenSource?: TokenSource;
  /** The platform's fetch; defaults to the global one. */
  fetch?: typeof fetch;
  /** Per-request deadline, default 30 s. */
  timeoutMs?: number;
}

/**
 * A {@link Transport} over Web-standard `fetch` with a bearer token — the one Cloudflare Workers
 * use. It imports nothing Node-specific.
 *
 * Caveats: TLS is the platform's: the server must present a certificate the platform trusts
 * (Workers cannot be given a private cluster CA). Use `createNodeTransport` for kubeconfig auth.
 *
 * @example
 * const kube = createKube(createFetchTransport({ server: env.KUBE_SERVER, token: env.KUBE_TOKEN }));
 */
export function createFetchTransport(options: FetchTransportOptions): Transport {
  const base = options.server.replace(/\/+$/, "");
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));

  return {
    async request(req: TransportRequest): Promise<TransportResponse> {
      const deadline = requestDeadline(req, options.timeoutMs);
      const send = async (token: string | undefined): Promise<TransportResponse> => {
        const headers = new Headers({ accept: req.accept ?? "application/json", "user-agent": "kubefn" });
        if (req.contentType) headers.set("content-type", req.contentType);
        if (token) headers.set("authorization", `Bearer ${token}`);
        const res = await doFetch(`${base}${req.path}`, {
          method: req.method,
          headers,
          body: req.body,
          signal: deadline.signal,
          // Never follow a redirect: it would carry the bearer token to wherever it points.
          redirect: "manual",
        });
        return { status: res.status, headers: res.headers, body: await res.text() };
      };
      try {
        const source = options.tokenSource;
        if (!source)
          return await send(typeof options.token === "function" ? await options.token() : options.token);
        const token = await source.token();
        const res = await send(token);
        if (res.status !== 401) return res;
        const renewed = await source.renew(token);
        return renewed === undefined ? res : await send(renewed);
      } catch (err) {
        throw deadline.failure(err);
      }
    },
  };
}
