/**
 * The SubPool operator's settings, the seed's operator configuration (`SUBPOOL_*`). A bad value
 * stops SubPools only: each says so on Ready (`InvalidOperatorConfig`), and the other operators run.
 */
import * as z from "../../zod/index.ts";
import type { OperatorSettingsDeclaration } from "../operator.ts";
import { type InvalidOperatorConfig, type OperatorConfig, parseOperatorConfig } from "./config.ts";

export const subPoolVariables = {
  SUBPOOL_MAX_CPU: z.optional(z.string()),
  SUBPOOL_MAX_MEMORY: z.optional(z.string()),
  /** "namespace/name" of the Gateway HTTPRoutes attach to by default. */
  SUBPOOL_GATEWAY: z.optional(z.string()),
  SUBPOOL_HOSTNAME_SUFFIX: z.optional(z.string()),
  /** "namespace/service" of the shared proxy gateway (Mihomo). */
  SUBPOOL_PROXY_GATEWAY: z.optional(z.string()),
  /** Seconds between looks at every active pool (the seed's 30 s requeue); unset: the sweep's drift pass. */
  SUBPOOL_RECHECK_SECONDS: z.optional(z.string()),
};

/** `SUBPOOL_RECHECK_SECONDS`, parsed by hand so that a bad value stops SubPools only. */
export const subPoolRecheckRange = { min: 5, max: 3600, integer: true } as const;

export interface SubPoolSettings {
  /** Invalid: SubPools say so on Ready (`InvalidOperatorConfig`); the other operators run on. */
  config: OperatorConfig | InvalidOperatorConfig;
  /** `SUBPOOL_RECHECK_SECONDS`: a look at every active pool this often (the seed's 30 s). */
  recheckSeconds?: number;
}

export const subPoolSettings: OperatorSettingsDeclaration<typeof subPoolVariables, SubPoolSettings> = {
  variables: subPoolVariables,
  ranges: { SUBPOOL_RECHECK_SECONDS: subPoolRecheckRange },
  parse(e) {
    const problems: string[] = [];
    const pair = (name: string, value: string | undefined) => {
      if (value === undefined) return undefined;
      const [namespace, object, ...rest] = value.split("/");
      if (!namespace || !object || rest.length > 0) {
        problems.push(`${name}: must be namespace/name`);
        return undefined;
      }
      return { namespace, object };
    };
    const gateway = pair("SUBPOOL_GATEWAY", e.SUBPOOL_GATEWAY);
    const proxyGateway = pair("SUBPOOL_PROXY_GATEWAY", e.SUBPOOL_PROXY_GATEWAY);
    const data: Record<string, string> = {};
    if (e.SUBPOOL_MAX_CPU !== undefined) data.maxCPU = e.SUBPOOL_MAX_CPU;
    if (e.SUBPOOL_MAX_MEMORY !== undefined) data.maxMemory = e.SUBPOOL_MAX_MEMORY;
    if (gateway) Object.assign(data, { gatewayNamespace: gateway.namespace, gatewayName: gateway.object });
    if (e.SUBPOOL_HOSTNAME_SUFFIX !== undefined) data.hostnameSuffix = e.SUBPOOL_HOSTNAME_SUFFIX;
    if (proxyGateway) {
      Object.assign(data, {
        proxyGatewayNamespace: proxyGateway.namespace,
        proxyGatewayService: proxyGateway.object,
      });
    }
    let recheckSeconds: number | undefined;
    if (e.SUBPOOL_RECHECK_SECONDS !== undefined && e.SUBPOOL_RECHECK_SECONDS !== "") {
      const seconds = Number(e.SUBPOOL_RECHECK_SECONDS);
      const { min, max } = subPoolRecheckRange;
      if (Number.isInteger(seconds) && seconds >= min && seconds <= max) recheckSeconds = seconds;
      else problems.push(`SUBPOOL_RECHECK_SECONDS: must be whole seconds from ${min} to ${max}`);
    }
    const parsed = parseOperatorConfig(data);
    if (!parsed.ok) problems.push(`SUBPOOL_*: ${parsed.message}`);
    const config: OperatorConfig | InvalidOperatorConfig =
      parsed.ok && problems.length === 0 ? parsed.config : { invalid: problems.join("; ") };
    return { ok: true, settings: { config, ...(recheckSeconds === undefined ? {} : { recheckSeconds }) } };
  },
  invalid: (settings) => ("invalid" in settings.config ? settings.config.invalid : undefined),
};
