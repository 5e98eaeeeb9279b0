import { requestDeadline } from "./deadline.ts";
import type { Transport, TransportRequest, TransportResponse } from "./port.ts";

export interface FetchTransportOptions {
  /** API server base URL, e.g. "https://kube.example.com" (a path prefix is kept). */
  server: string;
  /** Bearer token, or a function returning the current one (called per request, for rotation). */
  token?: string | (() => string | Promise<string>);
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
      const headers = new Headers({ accept: req.accept ?? "application/json", "user-agent": "kubefn" });
      if (req.contentType) headers.set("content-type", req.contentType);
      const token = typeof options.token === "function" ? await options.token() : options.token;
      if (token) headers.set("authorization", `Bearer ${token}`);
      const deadline = requestDeadline(req, options.timeoutMs);
      try {
        const res = await doFetch(`${base}${req.path}`, {
          method: req.method,
          headers,
          body: req.body,
          signal: deadline.signal,
          // Never follow a redirect: it would carry the bearer token to wherever it points.
          redirect: "manual",
        });
        return { status: res.status, headers: res.headers, body: await res.text() };
      } catch (err) {
        throw deadline.failure(err);
      }
    },
  };
}
