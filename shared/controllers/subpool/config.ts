/**
 * The operator configuration: the platform envelope and the Gateway defaults. Immutable, as in
 * the seed (step 1 "读取并校验 immutable Operator Configuration"): an adapter parses it once, at
 * start, from the platform's settings (`SUBPOOL_*`), and hands the value to `subPoolController`.
 * A bad value stops the process with the settings error; no pass reads it from the cluster.
 */

import { dnsLabel, dnsSubdomain, milliValue } from "../../kube/index.ts";
import * as z from "../../zod/index.ts";

const quantityString = z
  .string()
  .check(z.trim())
  .check(z.refine((v) => (milliValue(v) ?? 0) > 0, "must be a positive resource quantity"));
const dnsLabelString = z.string().check(z.regex(dnsLabel, "must be a DNS label"));
const dnsSubdomainString = z.string().check(z.regex(dnsSubdomain, "must be a DNS subdomain"));

/** The configuration, key by key. Unknown keys are refused, so a typo is an error, not ignored. */
const configDataSchema = z.strictObject({
  /** Most CPU the cpa and cpa-manager containers may request together. */
  maxCPU: z._default(quantityString, "2"),
  /** Most memory the two containers may request together. */
  maxMemory: z._default(quantityString, "4Gi"),
  /** The Gateway HTTPRoutes attach to unless `spec.exposure.gateway` names one. */
  gatewayName: z.optional(dnsSubdomainString),
  gatewayNamespace: z.optional(dnsLabelString),
  /** Hostnames default to `<pool>.<hostnameSuffix>` in Gateway mode. */
  hostnameSuffix: z.optional(dnsSubdomainString),
  /** The shared proxy gateway (Mihomo) Service whose EndpointSlices ProxyGatewayReady reads. */
  proxyGatewayNamespace: z._default(dnsLabelString, "subrelay-system"),
  proxyGatewayService: z._default(dnsLabelString, "mihomo"),
});

export interface OperatorConfig {
  envelope: { cpu: string; memory: string };
  gateway?: { name: string; namespace: string };
  hostnameSuffix?: string;
  proxyGateway: { namespace: string; service: string };
}

export type ConfigResult = { ok: true; config: OperatorConfig } | { ok: false; message: string };

/**
 * A SubPool operator configuration that did not parse (a bad `SUBPOOL_*` setting): SubPools are
 * not reconciled — each says so on Ready (`InvalidOperatorConfig`) — while the Proxy and Site
 * operators run on, and a SubPool being deleted is still cleaned up.
 */
export interface InvalidOperatorConfig {
  invalid: string;
}

/**
 * Parses the configuration, key by key (pure): the adapters map `SUBPOOL_MAX_CPU` → `maxCPU`
 * and so on. `undefined` yields the defaults; a Gateway needs both name and namespace.
 */
export function parseOperatorConfig(data: Readonly<Record<string, string>> | undefined): ConfigResult {
  const parsed = configDataSchema.safeParse(data ?? {});
  if (!parsed.success) {
    return {
      ok: false,
      message: `operator configuration: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`,
    };
  }
  const d = parsed.data;
  if ((d.gatewayName === undefined) !== (d.gatewayNamespace === undefined)) {
    return { ok: false, message: "operator configuration: gatewayName and gatewayNamespace go together" };
  }
  const config: OperatorConfig = {
    envelope: { cpu: d.maxCPU, memory: d.maxMemory },
    proxyGateway: { namespace: d.proxyGatewayNamespace, service: d.proxyGatewayService },
  };
  if (d.gatewayName !== undefined && d.gatewayNamespace !== undefined) {
    config.gateway = { name: d.gatewayName, namespace: d.gatewayNamespace };
  }
  if (d.hostnameSuffix !== undefined) config.hostnameSuffix = d.hostnameSuffix;
  return { ok: true, config };
}

/** The configuration with nothing set: a 2 CPU / 4Gi envelope, no Gateway defaults. */
export const defaultOperatorConfig: OperatorConfig = {
  envelope: { cpu: "2", memory: "4Gi" },
  proxyGateway: { namespace: "subrelay-system", service: "mihomo" },
};
