/**
 * The Workers prober, on TCP sockets. The Workers adapter passes `connect` from
 * "cloudflare:sockets" in; this file never imports it, so neither the Node build nor the tests
 * see that module (and the tests drive it with a node:net stand-in).
 *
 * - http probe URL → one socket to the proxy, a GET in absolute form, the status line parsed.
 * - https probe URL → a `starttls` socket to the proxy, CONNECT, then `startTls()` with the
 *   target's host name inside the tunnel and a GET in origin form.
 * Every probe opens its own socket and closes it (no keep-alive; see `probe.ts`).
 *
 * Caveats: Workers cannot resolve names, so a proxy host name that resolves to a metadata, loopback
 * or private address is not caught here: only literal addresses are refused (by the sweep's
 * `screenProbeTarget`; see `target.ts`). Workers' own egress reaches neither a cloud metadata
 * service nor a private network, which is what makes that residue acceptable there. An https *proxy* with an https probe URL
 * would need TLS inside TLS, which `startTls()` cannot do: such probes fail with a clear error.
 * Workers sockets cannot use a private CA: https targets need publicly trusted certificates.
 * Latency is measured with `performance.now()`, which on Workers advances only across I/O (that
 * is what is measured here).
 */

import { describeError, type ProbeResult, type Prober, type ProbeTarget } from "./probe.ts";

/** The part of a Workers `Socket` the prober uses. */
export interface WorkerSocket {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  close(): Promise<void>;
  startTls(options?: { expectedServerHostname?: string }): WorkerSocket;
}

/** The shape of `connect` from "cloudflare:sockets". */
export type SocketConnect = (
  address: { hostname: string; port: number },
  options?: { secureTransport?: "off" | "on" | "starttls"; allowHalfOpen?: boolean },
) => WorkerSocket;

export interface SocketProberOptions {
  connect: SocketConnect;
  userAgent?: string;
}

const maxHeadBytes = 16 * 1024;

/**
 * @example
 * // functions/cloudflare/sweep.ts
 * import { connect } from "cloudflare:sockets";
 * const prober = createSocketProber({ connect });
 */
export function createSocketProber(options: SocketProberOptions): Prober {
  const userAgent = options.userAgent ?? "kubefn-health-probe";
  return {
    async probe(target: ProbeTarget): Promise<ProbeResult> {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      let url: URL;
      try {
        url = new URL(target.url);
      } catch {
        return { ok: false, latencyMs: 0, error: `probe URL ${JSON.stringify(target.url)} is not a URL` };
      }
      const tunnel = url.protocol === "https:";
      if (tunnel && target.proxy.scheme === "https") {
        return {
          ok: false,
          latencyMs: 0,
          error: "https probe URLs through an https proxy are not supported on Workers",
        };
      }

      const sockets: WorkerSocket[] = [];
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ProbeTimeout(target.timeoutMs)), target.timeoutMs);
      });
      const exchange = async (): Promise<number> => {
        const proxySocket = options.connect(
          { hostname: target.proxy.host, port: target.proxy.port },
          { secureTransport: tunnel ? "starttls" : target.proxy.scheme === "https" ? "on" : "off" },
        );
        sockets.push(proxySocket);
        const host = url.host;
        if (!tunnel) {
          await send(proxySocket, requestHead(`GET ${url.href} HTTP/1.1`, host, userAgent));
          return statusOf(await readHead(proxySocket, "status-line"));
        }
        const authority = `${bracketed(url.hostname)}:${url.port || "443"}`;
        await send(proxySocket, `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
        const connectStatus = statusOf(await readHead(proxySocket, "full"));
        if (connectStatus !== 200) throw new Error(`proxy answered CONNECT with ${connectStatus}`);
        const tls = proxySocket.startTls({ expectedServerHostname: url.hostname });
        sockets.push(tls);
        await send(tls, requestHead(`GET ${url.pathname}${url.search} HTTP/1.1`, host, userAgent));
        return statusOf(await readHead(tls, "status-line"));
      };

      try {
        const status = await Promise.race([exchange(), timeout]);
        const latencyMs = elapsed();
        const ok = status === target.expectedStatus;
        return {
          ok,
          latencyMs,
          status,
          ...(ok ? {} : { error: `status ${status}, expected ${target.expectedStatus}` }),
        };
      } catch (err) {
        return {
          ok: false,
          latencyMs: elapsed(),
          error: err instanceof ProbeTimeout ? err.message : describeError(err),
        };
      } finally {
        clearTimeout(timer);
        await Promise.all(sockets.map((s) => s.close().catch(() => undefined)));
      }
    },
  };
}

class ProbeTimeout extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
  }
}

function bracketed(hostname: string): string {
  return hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname;
}

function requestHead(requestLine: string, host: string, userAgent: string): string {
  return `${requestLine}\r\nHost: ${host}\r\nUser-Agent: ${userAgent}\r\nConnection: close\r\nAccept: */*\r\n\r\n`;
}

async function send(socket: WorkerSocket, text: string): Promise<void> {
  const writer = socket.writable.getWriter();
  try {
    await writer.write(new TextEncoder().encode(text));
  } finally {
    writer.releaseLock();
  }
}

/**
 * Reads the response head: up to the end of the status line, or (for CONNECT, which must leave
 * the stream positioned at the tunnel's first byte) up to the blank line.
 */
async function readHead(socket: WorkerSocket, until: "status-line" | "full"): Promise<string> {
  const reader = socket.readable.getReader();
  const decoder = new TextDecoder("latin1");
  let head = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done)
        throw new Error(
          head === "" ? "connection closed before a response" : "connection closed mid-response",
        );
      head += decoder.decode(value, { stream: true });
      if (until === "status-line" && head.includes("\r\n")) return head;
      if (until === "full" && head.includes("\r\n\r\n")) return head;
      if (head.length > maxHeadBytes) throw new Error("response head too large");
    }
  } finally {
    reader.releaseLock();
  }
}

function statusOf(head: string): number {
  const m = /^HTTP\/\d(?:\.\d)? (\d{3})/.exec(head);
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(head.slice(0, 40))}`);
  return Number(m[1]);
}
