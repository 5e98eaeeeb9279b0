/**
 * The Prober port: one health probe of one proxy. Implementations:
 * - `node-prober.ts` (Node host and Lambda, `node:net`/`node:tls` sockets; a Node-only file), bound
 *   by those adapters;
 * - `socket-prober.ts` (Workers, `connect()` sockets passed in by the Workers adapter).
 * Neither is exported from `index.ts`, so the neutral core never pulls in a platform's sockets.
 *
 * Every implementation must open a fresh connection per probe and close it afterwards: with a
 * kept-alive connection an https probe would reuse the CONNECT tunnel and later probes would never
 * exercise the proxy's tunnelling again.
 */

import type { ProbeTimer } from "./deadlines.ts";
import { checkProbeTarget, type RefusalReason, type TargetPolicy, type TargetVerdict } from "./target.ts";

export interface ProxyEndpoint {
  host: string;
  port: number;
  /** How to talk to the proxy itself; "https" means TLS to the proxy. */
  scheme: "http" | "https";
}

export interface ProbeTarget {
  proxy: ProxyEndpoint;
  /** The URL fetched through the proxy: http → absolute-form GET; https → CONNECT + TLS in the tunnel. */
  url: string;
  expectedStatus: number;
  timeoutMs: number;
  /**
   * How the proxy's address is screened where the prober resolves its name (the Node prober);
   * the strictest (a tenant's host, no allow-list) when unset. The sweep sets it.
   */
  policy?: TargetPolicy;
}

export interface ProbeResult {
  /** No error and the expected status. */
  ok: boolean;
  /** From the start of the probe to the response status line (or to the failure). */
  latencyMs: number;
  status?: number;
  error?: string;
  /** Set when the prober refused to connect (e.g. the proxy's name resolved to a metadata address). */
  refused?: { reason: RefusalReason; message: string };
}

export interface Prober {
  /**
   * Never rejects: failures are results with `ok: false`. The probe's `timeoutMs` runs on `timer`
   * when one is given (`boundedProber`'s, one timer for many probes), else on a timer of its own.
   */
  probe(target: ProbeTarget, timer?: ProbeTimer): Promise<ProbeResult>;
}

/**
 * Checks both hosts a probe involves before anything connects: the proxy (we connect to it;
 * screened by `policy`) and the probe URL's host (the proxy connects to it on our behalf; always a
 * tenant's, so only the allow-list of `policy` applies to it).
 */
export function screenProbeTarget(
  target: Pick<ProbeTarget, "proxy" | "url">,
  policy: TargetPolicy = {},
): TargetVerdict {
  const proxyVerdict = checkProbeTarget(target.proxy.host, policy);
  if (!proxyVerdict.allowed) return proxyVerdict;
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    return {
      allowed: false,
      reason: "InvalidURL",
      message: `probe URL ${JSON.stringify(target.url)} is not a URL`,
    };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return {
      allowed: false,
      reason: "InvalidURL",
      message: `probe URL ${JSON.stringify(target.url)} must be http or https`,
    };
  }
  return checkProbeTarget(url.hostname, policy.allow ? { allow: policy.allow } : {});
}

/** Shortens an error to a one-line message for results and conditions. */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === "string" ? `${code} ` : "";
    return `${prefix}${err.message}${cause}`.slice(0, 300);
  }
  return String(err).slice(0, 300);
}
