/**
 * The Node (host and Lambda) prober, on undici. Imported by path by those adapters only; it is not
 * part of `shared/health/index.ts`.
 *
 * Each probe builds a fresh `ProxyAgent` and destroys it when the probe ends, so every probe opens
 * a new connection to the proxy: with keep-alive an https probe would reuse the CONNECT tunnel and
 * later probes would never exercise the proxy's tunnelling again.
 * - http probe URL → a GET in absolute form to the proxy (`proxyTunnel: false`);
 * - https probe URL → CONNECT through the proxy and TLS with the target inside the tunnel.
 *
 * The proxy's host name is resolved here, once, and every resolved address is screened with the
 * target's policy (see `target.ts`: loopback and private addresses refused for a tenant's host
 * unless `PROBE_ALLOWED_CIDRS` admits them) before connecting; the probe then connects to the
 * screened address, so a DNS answer cannot change between check and use (no DNS rebinding).
 *
 * Caveats: the probe URL's host is resolved by the proxy, so only its literal form is screened
 * (by `screenProbeTarget` in the sweep).
 */

import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { ProxyAgent, request } from "undici";
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
  /** Response bodies are read and discarded up to this many bytes (default 64 KiB). */
  maxBodyBytes?: number;
  /** Sent as the User-Agent header. */
  userAgent?: string;
}

/**
 * @example
 * const prober = createNodeProber();
 * await prober.probe({ proxy: { host: "10.0.0.5", port: 3128, scheme: "http" },
 *   url: "https://example.com/", expectedStatus: 200, timeoutMs: 5000 });
 */
export function createNodeProber(options: NodeProberOptions = {}): Prober {
  const resolve = options.resolve ?? defaultResolve;
  return {
    async probe(target: ProbeTarget): Promise<ProbeResult> {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      const signal = AbortSignal.timeout(target.timeoutMs);

      let address: string;
      try {
        const addresses = isIP(target.proxy.host)
          ? [target.proxy.host]
          : await withSignal(resolve(target.proxy.host), signal);
        if (addresses.length === 0) throw new Error(`no addresses for ${target.proxy.host}`);
        for (const a of addresses) {
          const ip = parseIpLiteral(a);
          if (!ip) continue;
          const shown = a === target.proxy.host ? a : `${target.proxy.host} (${a})`;
          const verdict = checkAddress(ip, shown, target.policy);
          if (!verdict.allowed) {
            return {
              ok: false,
              latencyMs: elapsed(),
              refused: { reason: verdict.reason, message: verdict.message },
            };
          }
        }
        address = addresses[0]!;
      } catch (err) {
        return { ok: false, latencyMs: elapsed(), error: `resolving proxy host: ${describeError(err)}` };
      }

      const hostForUrl = isIP(address) === 6 ? `[${address}]` : address;
      const proxyIsName = isIP(target.proxy.host) === 0;
      const agent = new ProxyAgent({
        uri: `${target.proxy.scheme}://${hostForUrl}:${target.proxy.port}`,
        proxyTunnel: false,
        connections: 1,
        pipelining: 0,
        requestTls: { ca: options.ca, rejectUnauthorized: options.rejectUnauthorized ?? true },
        proxyTls: { ca: options.ca, ...(proxyIsName ? { servername: target.proxy.host } : {}) },
      });
      try {
        const res = await request(target.url, {
          dispatcher: agent,
          method: "GET",
          signal,
          headers: { "user-agent": options.userAgent ?? "kubefn-health-probe" },
        });
        const latencyMs = elapsed();
        await res.body.dump({ limit: options.maxBodyBytes ?? 65536 }).catch(() => undefined);
        const ok = res.statusCode === target.expectedStatus;
        return {
          ok,
          latencyMs,
          status: res.statusCode,
          ...(ok ? {} : { error: `status ${res.statusCode}, expected ${target.expectedStatus}` }),
        };
      } catch (err) {
        const timedOut = signal.aborted;
        return {
          ok: false,
          latencyMs: elapsed(),
          error: timedOut ? `timed out after ${target.timeoutMs} ms` : describeError(err),
        };
      } finally {
        await agent.destroy().catch(() => undefined);
      }
    },
  };
}

async function defaultResolve(host: string): Promise<string[]> {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

function withSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error("aborted"));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
