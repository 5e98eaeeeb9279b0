/**
 * The Node (host and Lambda) prober, on `node:net` and `node:tls` sockets. Imported by path by
 * those adapters only; it is not part of `shared/health/index.ts`.
 *
 * Every probe opens its own connection to the proxy and closes it once the status line is in (no
 * keep-alive: a kept-alive https tunnel would let later probes skip the proxy's CONNECT, and a
 * kept-alive connection would hide a proxy that no longer accepts new ones):
 * - http probe URL → a GET in absolute form to the proxy;
 * - https probe URL → CONNECT through the proxy and TLS with the target inside the tunnel, then
 *   a GET in origin form;
 * - an https proxy → TLS to the proxy first (its name as SNI and for verification).
 * One deadline bounds the whole probe (resolution, connect, exchange; on the caller's timer when
 * it gives one); the response is read up to its
 * status line, which is where the latency is taken.
 *
 * Plain sockets, not an HTTP client: a probe is a connect, a few hundred bytes each way and a
 * close, and an HTTP client's per-request machinery (dispatcher, pool, parser, abort signal,
 * errors built on teardown) cost several times that in CPU on a host probing thousands of Proxies
 * a minute (`npm run bench -- probe-cpu`).
 *
 * The proxy's host name is resolved here, once, and every resolved address is screened with the
 * target's policy (see `target.ts`: loopback and private addresses refused for a tenant's host
 * unless `PROBE_ALLOWED_CIDRS` admits them) before connecting; the probe then connects to the
 * screened address, so a DNS answer cannot change between check and use (no DNS rebinding).
 *
 * Caveats: the probe URL's host is resolved by the proxy, so only its literal form is screened
 * (by `screenProbeTarget` in the sweep). The response body is not read.
 */

import { lookup } from "node:dns/promises";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { ownTimer, type ProbeTimer } from "./deadlines.ts";
import {
  checkAddress,
  describeError,
  type ProbeResult,
  type Prober,
  type ProbeTarget,
  parseIpLiteral,
} from "./index.ts";

export interface NodeProberOptions {
  /** Extra trusted CA certificates (PEM) for https probe URLs and https proxies. */
  ca?: string | string[];
  /** Only for tests: skip verification of the probe target's certificate. */
  rejectUnauthorized?: boolean;
  /** Resolves a host name to addresses; defaults to `dns.lookup` with `all: true`. */
  resolve?: (host: string) => Promise<string[]>;
  /** Sent as the User-Agent header. */
  userAgent?: string;
}

/** A response head larger than this fails the probe. */
const maxHeadBytes = 16 * 1024;

/**
 * @example
 * const prober = createNodeProber();
 * await prober.probe({ proxy: { host: "10.0.0.5", port: 3128, scheme: "http" },
 *   url: "https://example.com/", expectedStatus: 200, timeoutMs: 5000 });
 */
export function createNodeProber(options: NodeProberOptions = {}): Prober {
  const resolve = options.resolve ?? defaultResolve;
  const userAgent = options.userAgent ?? "kubefn-health-probe";
  return {
    async probe(target: ProbeTarget, timer: ProbeTimer = ownTimer): Promise<ProbeResult> {
      const started = performance.now();
      const deadline = started + target.timeoutMs;
      const timedOut = `timed out after ${target.timeoutMs} ms`;

      let url: URL;
      try {
        url = new URL(target.url);
      } catch {
        return { ok: false, latencyMs: 0, error: `probe URL ${JSON.stringify(target.url)} is not a URL` };
      }
      if (url.protocol !== "http:" && url.protocol !== "https:")
        return { ok: false, latencyMs: 0, error: `probe URL scheme ${url.protocol} is not http or https` };

      let address: string;
      const proxyIsName = isIP(target.proxy.host) === 0;
      try {
        const addresses = proxyIsName
          ? await withTimeout(resolve(target.proxy.host), target.timeoutMs, timedOut, timer)
          : [target.proxy.host];
        if (addresses.length === 0) throw new Error(`no addresses for ${target.proxy.host}`);
        for (const a of addresses) {
          const ip = parseIpLiteral(a);
          if (!ip) continue;
          const shown = a === target.proxy.host ? a : `${target.proxy.host} (${a})`;
          const verdict = checkAddress(ip, shown, target.policy);
          if (!verdict.allowed) {
            return {
              ok: false,
              latencyMs: performance.now() - started,
              refused: { reason: verdict.reason, message: verdict.message },
            };
          }
        }
        address = addresses[0]!;
      } catch (err) {
        const latencyMs = performance.now() - started;
        if (err instanceof Timeout) return { ok: false, latencyMs, error: timedOut };
        return { ok: false, latencyMs, error: `resolving proxy host: ${describeError(err)}` };
      }

      return exchange({
        address,
        target,
        url,
        userAgent,
        ca: options.ca,
        rejectUnauthorized: options.rejectUnauthorized ?? true,
        proxyServername: proxyIsName ? target.proxy.host : undefined,
        started,
        remainingMs: Math.max(0, deadline - performance.now()),
        timedOut,
        timer,
      });
    },
  };
}

interface Exchange {
  address: string;
  target: ProbeTarget;
  url: URL;
  userAgent: string;
  ca: string | string[] | undefined;
  rejectUnauthorized: boolean;
  proxyServername: string | undefined;
  started: number;
  remainingMs: number;
  timedOut: string;
  timer: ProbeTimer;
}

/** Connects to the proxy, sends the probe's request(s), and settles on the status line. */
function exchange(x: Exchange): Promise<ProbeResult> {
  const { target, url } = x;
  return new Promise<ProbeResult>((settle) => {
    let done = false;
    let inner: Socket | undefined;
    const finish = (result: ProbeResult) => {
      if (done) return;
      done = true;
      cancel();
      inner?.destroy();
      socket.destroy();
      settle(result);
    };
    const fail = (err: unknown) =>
      finish({ ok: false, latencyMs: performance.now() - x.started, error: describeError(err) });
    const onStatus = (status: number) => {
      const ok = status === target.expectedStatus;
      finish({
        ok,
        latencyMs: performance.now() - x.started,
        status,
        ...(ok ? {} : { error: `status ${status}, expected ${target.expectedStatus}` }),
      });
    };
    const cancel = x.timer(x.remainingMs, () =>
      finish({ ok: false, latencyMs: performance.now() - x.started, error: x.timedOut }),
    );

    const proxyTls = target.proxy.scheme === "https";
    const socket: Socket = proxyTls
      ? tlsConnect({
          host: x.address,
          port: target.proxy.port,
          ca: x.ca,
          // Verified against its name (also sent as SNI) or, for a literal, its address.
          ...(x.proxyServername ? { servername: x.proxyServername } : {}),
        })
      : netConnect({ host: x.address, port: target.proxy.port });
    socket.on("error", fail);
    socket.once(proxyTls ? "secureConnect" : "connect", () => {
      if (url.protocol === "http:") {
        socket.write(requestHead(`GET ${url.href} HTTP/1.1`, url.host, x.userAgent), "latin1");
        readHead(socket, "status-line", onStatus, fail);
        return;
      }
      const authority = `${url.hostname}:${url.port || "443"}`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`, "latin1");
      readHead(
        socket,
        "full",
        (status) => {
          if (status !== 200) return fail(new Error(`proxy answered CONNECT with ${status}`));
          const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
          const tls = tlsConnect({
            socket,
            host: hostname,
            ...(isIP(hostname) === 0 ? { servername: hostname } : {}),
            ca: x.ca,
            rejectUnauthorized: x.rejectUnauthorized,
          });
          inner = tls;
          tls.on("error", fail);
          tls.once("secureConnect", () => {
            tls.write(
              requestHead(`GET ${url.pathname}${url.search} HTTP/1.1`, url.host, x.userAgent),
              "latin1",
            );
            readHead(tls, "status-line", onStatus, fail);
          });
        },
        fail,
      );
    });
  });
}

function requestHead(requestLine: string, host: string, userAgent: string): string {
  return `${requestLine}\r\nHost: ${host}\r\nUser-Agent: ${userAgent}\r\nConnection: close\r\nAccept: */*\r\n\r\n`;
}

/**
 * Reads a response head from `socket`: up to the end of the status line, or (for CONNECT, which
 * must leave the stream at the tunnel's first byte) up to the blank line; then stops reading and
 * hands over the status.
 */
function readHead(
  socket: Socket,
  until: "status-line" | "full",
  onStatus: (status: number) => void,
  fail: (err: unknown) => void,
): void {
  let head = "";
  const stop = () => {
    socket.off("data", onData);
    socket.off("end", onEnd);
  };
  const onData = (chunk: Buffer) => {
    head += chunk.toString("latin1");
    if (!head.includes(until === "full" ? "\r\n\r\n" : "\r\n")) {
      if (head.length > maxHeadBytes) {
        stop();
        fail(new Error("response head too large"));
      }
      return;
    }
    stop();
    const m = /^HTTP\/\d(?:\.\d)? (\d{3})/.exec(head);
    if (!m) return fail(new Error(`not an HTTP response: ${JSON.stringify(head.slice(0, 40))}`));
    onStatus(Number(m[1]));
  };
  const onEnd = () => {
    stop();
    fail(new Error(head === "" ? "connection closed before a response" : "connection closed mid-response"));
  };
  socket.on("data", onData);
  socket.on("end", onEnd);
}

class Timeout extends Error {}

async function defaultResolve(host: string): Promise<string[]> {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/** `promise`, or a {@link Timeout} after `ms` on `timer`. */
function withTimeout<T>(promise: Promise<T>, ms: number, message: string, timer: ProbeTimer): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = timer(ms, () => reject(new Timeout(message)));
    promise.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (err: unknown) => {
        cancel();
        reject(err);
      },
    );
  });
}
