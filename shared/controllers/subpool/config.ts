/**
 * The operator configuration: one ConfigMap (default `kubefn-system/subpool-operator-config`)
 * holding the platform envelope and the Gateway defaults. It is immutable in the sense of the
 * seed: the operator never writes it, and each pass reads it first (step 1), so a change reaches
 * every SubPool through the ConfigMap watch.
 */
import * as z from "zod";
import type { Kube, KubeObject, ObjectKey } from "../../kube/index.ts";
import { isNotFound, milliValue, Resources } from "../../kube/index.ts";

/** Where the operator configuration lives. */
export const defaultOperatorConfigKey: Required<ObjectKey> = {
  namespace: "kubefn-system",
  name: "subpool-operator-config",
};

const quantityString = z
  .string()
  .trim()
  .refine((v) => (milliValue(v) ?? 0) > 0, "must be a positive resource quantity");
const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS label");
const dnsSubdomain = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, "must be a DNS subdomain");

/**
 * The ConfigMap's `data`, key by key. Unknown keys are refused, so a typo is a condition rather
 * than a silently ignored setting.
 */
const configDataSchema = z.strictObject({
  /** Most CPU the cpa and cpa-manager containers may request together. */
  maxCPU: quantityString.default("2"),
  /** Most memory the two containers may request together. */
  maxMemory: quantityString.default("4Gi"),
  /** The Gateway HTTPRoutes attach to unless `spec.exposure.gateway` names one. */
  gatewayName: dnsSubdomain.optional(),
  gatewayNamespace: dnsLabel.optional(),
  /** Hostnames default to `<pool>.<hostnameSuffix>` in Gateway mode. */
  hostnameSuffix: dnsSubdomain.optional(),
  /** The shared proxy gateway (Mihomo) Service whose EndpointSlices ProxyGatewayReady reads. */
  proxyGatewayNamespace: dnsLabel.default("subrelay-system"),
  proxyGatewayService: dnsLabel.default("mihomo"),
});

export interface OperatorConfig {
  envelope: { cpu: string; memory: string };
  gateway?: { name: string; namespace: string };
  hostnameSuffix?: string;
  proxyGateway: { namespace: string; service: string };
}

export type ConfigResult = { ok: true; config: OperatorConfig } | { ok: false; message: string };

/**
 * Parses the ConfigMap's `data` (pure). A missing ConfigMap is `undefined` and yields the
 * defaults; a Gateway needs both name and namespace.
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

/** Reads and parses the operator configuration; absent means defaults. */
export async function readOperatorConfig(kube: Kube, key: Required<ObjectKey>): Promise<ConfigResult> {
  let data: Record<string, string> | undefined;
  try {
    const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(Resources.ConfigMap, key);
    data = cm.data ?? {};
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return parseOperatorConfig(data);
}
