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

import { ownTimer, type ProbeTimer } from "./deadlines.ts";
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
    async probe(target: ProbeTarget, timer: ProbeTimer = ownTimer): Promise<ProbeResult> {
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
      const exchange = async (): Promise<number> => {
        const proxySocket = options.connect(
          { hostname: target.proxy.host, port: target.proxy.port },
          { secureTransport: tunnel ? "starttls" : target.proxy.scheme === "https" ? "on" : "off" },
        );
        sockets.push(proxySocket);
        const host = url.host;
        if (!tunnel)
          return exchangeStatus(proxySocket, requestHead(`GET ${url.href} HTTP/1.1`, host, userAgent));
        const authority = `${bracketed(url.hostname)}:${url.port || "443"}`;
        await send(proxySocket, `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
        const connectStatus = statusOf(await readFullHead(proxySocket));
        if (connectStatus !== 200) throw new Error(`proxy answered CONNECT with ${connectStatus}`);
        const tls = proxySocket.startTls({ expectedServerHostname: url.hostname });
        sockets.push(tls);
        return exchangeStatus(tls, requestHead(`GET ${url.pathname}${url.search} HTTP/1.1`, host, userAgent));
      };

      // Settled once, by the exchange or by the timeout, whichever comes first (no `Promise.race`).
      return new Promise<ProbeResult>((settle) => {
        let done = false;
        const finish = (result: ProbeResult) => {
          if (done) return;
          done = true;
          cancel();
          // Not awaited: the answer is read, and nothing of the probe waits for the close.
          for (const s of sockets) s.close().catch(() => undefined);
          settle(result);
        };
        const cancel = timer(target.timeoutMs, () =>
          finish({ ok: false, latencyMs: elapsed(), error: `timed out after ${target.timeoutMs} ms` }),
        );
        exchange().then(
          (status) => {
            const ok = status === target.expectedStatus;
            finish({
              ok,
              latencyMs: elapsed(),
              status,
              ...(ok ? {} : { error: `status ${status}, expected ${target.expectedStatus}` }),
            });
          },
          (err: unknown) => finish({ ok: false, latencyMs: elapsed(), error: describeError(err) }),
        );
      });
    },
  };
}

function bracketed(hostname: string): string {
  return hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname;
}

function requestHead(requestLine: string, host: string, userAgent: string): string {
  return `${requestLine}\r\nHost: ${host}\r\nUser-Agent: ${userAgent}\r\nConnection: close\r\nAccept: */*\r\n\r\n`;
}

const encoder = new TextEncoder();

async function send(socket: WorkerSocket, text: string): Promise<void> {
  const writer = socket.writable.getWriter();
  try {
    await writer.write(encoder.encode(text));
  } finally {
    writer.releaseLock();
  }
}

/**
 * Sends `request` and reads the answer's status line. The read starts while the write is under
 * way (one wait, not two); a failed write's error is the one reported when the read fails too.
 * Neither lock is released: the probe closes the socket next.
 */
async function exchangeStatus(socket: WorkerSocket, request: string): Promise<number> {
  const written = socket.writable.getWriter().write(encoder.encode(request));
  written.catch(() => undefined);
  const reader = socket.readable.getReader();
  try {
    return statusOf(await readUntil(reader, statusLineEnd));
  } catch (err) {
    await written;
    throw err;
  }
}

/**
 * Reads the CONNECT answer's whole head: the stream must be left at the tunnel's first byte, so
 * the reader's lock is released for `startTls()`.
 */
async function readFullHead(socket: WorkerSocket): Promise<string> {
  const reader = socket.readable.getReader();
  try {
    return await readUntil(reader, headEnd);
  } finally {
    reader.releaseLock();
  }
}

/** Where the status line ends (its CR LF), or -1. */
const statusLineEnd = (bytes: Uint8Array): number => indexOfCrLf(bytes, 0);

/** Where the head ends (the CR LF of its blank line), or -1. */
function headEnd(bytes: Uint8Array): number {
  for (let at = indexOfCrLf(bytes, 0); at >= 0; at = indexOfCrLf(bytes, at + 2))
    if (bytes[at + 2] === 13 && bytes[at + 3] === 10) return at + 2;
  return -1;
}

function indexOfCrLf(bytes: Uint8Array, from: number): number {
  for (let at = bytes.indexOf(13, from); at >= 0; at = bytes.indexOf(13, at + 1))
    if (bytes[at + 1] === 10) return at;
  return -1;
}

/**
 * Reads chunks until `end` finds its mark in what was read, and returns the text up to it
 * (latin1: one character a byte). The bytes are scanned, never decoded whole: only the line or
 * head asked for becomes a string.
 */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  end: (bytes: Uint8Array) => number,
): Promise<string> {
  let head: Uint8Array = new Uint8Array(0);
  for (;;) {
    const { value, done } = await reader.read();
    if (done)
      throw new Error(
        head.length === 0 ? "connection closed before a response" : "connection closed mid-response",
      );
    head = head.length === 0 ? value : concat(head, value);
    const at = end(head);
    if (at >= 0) return latin1(head.subarray(0, at));
    if (head.length > maxHeadBytes) throw new Error("response head too large");
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function latin1(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 4096)
    text += String.fromCharCode(...bytes.subarray(i, Math.min(bytes.length, i + 4096)));
  return text;
}

function statusOf(head: string): number {
  const m = /^HTTP\/\d(?:\.\d)? (\d{3})/.exec(head);
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(head.slice(0, 40))}`);
  return Number(m[1]);
}
