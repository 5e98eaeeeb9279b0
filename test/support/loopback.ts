/**
 * The tests talk only to loopback: their forward proxies and probe targets listen on 127.0.0.1.
 * kubefn refuses a tenant's loopback and private destinations unless the operator's allow-list
 * (`PROBE_ALLOWED_CIDRS`) admits them, so every test, bench and example that probes such a
 * fixture sets it, as an operator of a laptop cluster would.
 */
import { type ProbeAllowList, parseProbeAllowList } from "../../shared/health/index.ts";

/** `PROBE_ALLOWED_CIDRS` for a host, a Worker or a Lambda whose proxies are loopback fixtures. */
export const LOOPBACK_PROBE_CIDRS = "127.0.0.0/8,::1/128";

/** The parsed {@link LOOPBACK_PROBE_CIDRS}, for `createOperators`, `proxyController` and `proxyHealthTask`. */
export const loopbackProbeAllowList: ProbeAllowList = (() => {
  const parsed = parseProbeAllowList(LOOPBACK_PROBE_CIDRS.split(","));
  if (!parsed.ok) throw new Error(`bad ${LOOPBACK_PROBE_CIDRS}`);
  return parsed.allowList;
})();
