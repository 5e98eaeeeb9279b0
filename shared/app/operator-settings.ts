/**
 * The operators' own settings, under the same names on every platform (Workers `[vars]` and
 * secrets, the Lambda environment, the Node host's environment): what the seeds call the operator
 * configuration of SubPool (`SUBPOOL_*`), the Site components' `Config` and namespace (`SITE_*`),
 * the GCE provider (`GCE_*`), what Managed Proxies may run (`PROXY_ALLOWED_*`) and where probes may
 * go (`PROBE_ALLOWED_CIDRS`). Parsed once, at start; a platform spreads
 * {@link operatorVariables} into its schema and turns the result into {@link OperatorSettings}
 * with {@link operatorSettingsFrom}.
 */

import { defaultInstanceAllowList, type InstanceAllowList } from "../controllers/proxy/index.ts";
import type { ServiceAccountKey } from "../controllers/proxy/providers/index.ts";
import {
  type InvalidOperatorConfig,
  type OperatorConfig,
  parseOperatorConfig,
} from "../controllers/subpool/index.ts";
import { emptyProbeAllowList, type ProbeAllowList, parseProbeAllowList } from "../health/index.ts";
import { dnsLabel } from "../kube/index.ts";
import * as z from "../zod/index.ts";
import { commaList } from "./env-values.ts";
import { operatorSettingRanges } from "./setting-ranges.ts";

/** A GCE resource name (RFC 1035 label), or a partial URL of such names. */
const gceResourcePath = /^([a-z0-9-]+\/)*[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

export const operatorVariables = {
  SUBPOOL_MAX_CPU: z.optional(z.string()),
  SUBPOOL_MAX_MEMORY: z.optional(z.string()),
  /** "namespace/name" of the Gateway HTTPRoutes attach to by default. */
  SUBPOOL_GATEWAY: z.optional(z.string()),
  SUBPOOL_HOSTNAME_SUFFIX: z.optional(z.string()),
  /** "namespace/service" of the shared proxy gateway (Mihomo). */
  SUBPOOL_PROXY_GATEWAY: z.optional(z.string()),
  /** Seconds between looks at every active pool (the seed's 30 s requeue); unset: the sweep's drift pass. */
  SUBPOOL_RECHECK_SECONDS: z.optional(z.string()),
  SITE_IMAGE_REGISTRY: z._default(z.string().check(z.minLength(1)), "ghcr.io/unbounded-cloud"),
  SITE_IMAGE_TAG: z._default(z.string().check(z.minLength(1)), "latest"),
  SITE_APISERVER_ENDPOINT: z._default(
    z.url({ protocol: /^https?$/, error: "SITE_APISERVER_ENDPOINT must be an http(s) URL" }),
    "https://kubernetes.default.svc",
  ),
  /** Where Site components install; default: the namespace of kubefn's own ServiceAccount. */
  SITE_NAMESPACE: z.optional(z.string().check(z.regex(dnsLabel, "SITE_NAMESPACE must be a DNS label"))),
  GCE_PROJECT: z.optional(z.string().check(z.minLength(1))),
  /** Zones of the project: the first is the default for Proxies naming none; all are listed. */
  GCE_ZONES: z.optional(commaList),
  /** A service-account key (the JSON Google issues), from the platform's secret store. */
  GCE_CREDENTIALS: z.optional(z.string().check(z.minLength(1))),
  /**
   * The VPC network of proxy VMs, required with GCE_PROJECT: a name (`crawl-proxies`) or a
   * partial URL (`projects/p/global/networks/n`). `default` is accepted when written: never chosen
   * for the operator, since there a VM running a tenant's cloud-init reaches the project's other VMs.
   */
  GCE_NETWORK: z.optional(
    z.string().check(z.regex(gceResourcePath, "GCE_NETWORK must be a network name or path")),
  ),
  /** Its subnetwork: a name (in the region of the VM's zone) or `regions/<r>/subnetworks/<s>`. */
  GCE_SUBNETWORK: z.optional(
    z.string().check(z.regex(gceResourcePath, "GCE_SUBNETWORK must be a subnetwork name or path")),
  ),
  /** Network tags on every proxy VM, which the operator's firewall rules target (default `kubefn-proxy`). */
  GCE_NETWORK_TAGS: z.optional(commaList),
  /** Images a Managed Proxy may name (comma-separated; a trailing `*` matches by prefix, `*` alone any). */
  PROXY_ALLOWED_IMAGES: z.optional(commaList),
  /** Machine types a Managed Proxy may name, as PROXY_ALLOWED_IMAGES. */
  PROXY_ALLOWED_MACHINE_TYPES: z.optional(commaList),
  /**
   * Loopback, private and link-local CIDRs (comma-separated) a tenant's External endpoint and
   * probe URLs may name; none by default (see shared/health/target.ts). A metadata address only
   * when named alone (/32).
   */
  PROBE_ALLOWED_CIDRS: z.optional(commaList),
  /** Compute API base URL; tests point it at a local server. */
  GCE_COMPUTE_URL: z.optional(z.url({ protocol: /^https?$/ })),
};

export type OperatorVariables = z.infer<z.ZodMiniObject<typeof operatorVariables>>;

/** What {@link operatorSettingsFrom} gives `createOperators`. */
export interface OperatorSettings {
  /** Invalid: SubPools say so on Ready (`InvalidOperatorConfig`); the other operators run on. */
  subPool: OperatorConfig | InvalidOperatorConfig;
  /** `SUBPOOL_RECHECK_SECONDS`: a look at every active pool this often (the seed's 30 s). */
  subPoolRecheckSeconds?: number;
  site: {
    namespace: string;
    config: { imageRegistry: string; imageTag: string; apiServerEndpoint: string };
  };
  gce?: GceSettings;
  /**
   * What a Managed Proxy may ask its instance to run (zones are GCE_ZONES when set), and the
   * internal destinations probes may reach (`PROBE_ALLOWED_CIDRS`).
   */
  proxy: { instanceAllowList: InstanceAllowList; probeAllowList: ProbeAllowList };
}

export interface GceSettings {
  project: string;
  zones: string[];
  serviceAccountKey: ServiceAccountKey;
  computeUrl?: string;
  /** GCE_NETWORK: always named by the operator (`default` only when written). */
  network: string;
  subnetwork?: string;
  /** GCE_NETWORK_TAGS, for the operator's firewall rules. */
  networkTags: string[];
}

/** The network tag of proxy VMs when GCE_NETWORK_TAGS is unset. */
export const defaultGceNetworkTags = ["kubefn-proxy"];

const serviceAccountKeySchema = z.object({
  client_email: z.string().check(z.minLength(1)),
  private_key: z.string().check(z.includes("PRIVATE KEY")),
  private_key_id: z.optional(z.string()),
  token_uri: z.optional(z.url()),
});

/**
 * A Google service-account key file's JSON (`client_email`, `private_key`, ...), or undefined when
 * `text` is not one. For `GCE_CREDENTIALS` and the platforms' `KUBE_GOOGLE_CREDENTIALS`.
 */
export function parseServiceAccountKey(text: string): ServiceAccountKey | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = serviceAccountKeySchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** `KUBE_GOOGLE_CREDENTIALS` on Workers and Lambda: a service-account key whose tokens authenticate to GKE. */
export const kubeGoogleCredentialsSchema = z
  .string()
  .check(
    z.refine(
      (t) => parseServiceAccountKey(t) !== undefined,
      "KUBE_GOOGLE_CREDENTIALS must be a service-account key (JSON with client_email and private_key)",
    ),
  );

/** The namespace of the first ServiceAccount among `selfUsernames` (kubefn's own); else kubefn-system. */
export function ownNamespace(selfUsernames: readonly string[]): string {
  for (const user of selfUsernames) {
    const match = /^system:serviceaccount:([^:]+):[^:]+$/.exec(user);
    if (match?.[1]) return match[1];
  }
  return "kubefn-system";
}

/**
 * Validates the cross-field rules and builds the settings. Returns every problem, one line each,
 * naming the variable; a credentials problem never echoes the credentials.
 */
export function operatorSettingsFrom(
  e: OperatorVariables,
  selfUsernames: readonly string[],
): { ok: true; settings: OperatorSettings } | { ok: false; issues: string[] } {
  const issues: string[] = [];
  const subPoolIssues: string[] = [];
  const pair = (name: string, value: string | undefined) => {
    if (value === undefined) return undefined;
    const [namespace, object, ...rest] = value.split("/");
    if (!namespace || !object || rest.length > 0) {
      subPoolIssues.push(`${name}: must be namespace/name`);
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
  let subPoolRecheckSeconds: number | undefined;
  if (e.SUBPOOL_RECHECK_SECONDS !== undefined && e.SUBPOOL_RECHECK_SECONDS !== "") {
    const seconds = Number(e.SUBPOOL_RECHECK_SECONDS);
    const { min, max } = operatorSettingRanges.SUBPOOL_RECHECK_SECONDS;
    if (Number.isInteger(seconds) && seconds >= min && seconds <= max) subPoolRecheckSeconds = seconds;
    else subPoolIssues.push(`SUBPOOL_RECHECK_SECONDS: must be whole seconds from ${min} to ${max}`);
  }
  // A bad SUBPOOL_* value stops SubPools only: each says so on Ready (InvalidOperatorConfig).
  const parsed = parseOperatorConfig(data);
  if (!parsed.ok) subPoolIssues.push(`SUBPOOL_*: ${parsed.message}`);
  const subPool: OperatorConfig | InvalidOperatorConfig =
    parsed.ok && subPoolIssues.length === 0 ? parsed.config : { invalid: subPoolIssues.join("; ") };

  let gce: GceSettings | undefined;
  const gceSet = [e.GCE_PROJECT, e.GCE_ZONES, e.GCE_CREDENTIALS, e.GCE_NETWORK].filter(
    (v) => v !== undefined,
  ).length;
  if (gceSet > 0) {
    if (!e.GCE_PROJECT) issues.push("  GCE_PROJECT: required with GCE_ZONES and GCE_CREDENTIALS");
    if (!e.GCE_ZONES?.length) issues.push("  GCE_ZONES: required with GCE_PROJECT (comma-separated zones)");
    if (!e.GCE_NETWORK) {
      issues.push(
        "  GCE_NETWORK: required with GCE_PROJECT: the VPC network of proxy VMs, one of their own whose firewall denies egress to internal ranges (docs/deploying/gce.md); write `default` to use the project's default network knowingly",
      );
    }
    let key: ServiceAccountKey | undefined;
    if (!e.GCE_CREDENTIALS) {
      issues.push(
        "  GCE_CREDENTIALS: required with GCE_PROJECT (a service-account key, from the secret store)",
      );
    } else {
      key = parseServiceAccountKey(e.GCE_CREDENTIALS);
      if (!key)
        issues.push("  GCE_CREDENTIALS: not a service-account key (JSON with client_email and private_key)");
    }
    if (e.GCE_PROJECT && e.GCE_ZONES?.length && key && e.GCE_NETWORK) {
      gce = {
        project: e.GCE_PROJECT,
        zones: e.GCE_ZONES,
        serviceAccountKey: key,
        ...(e.GCE_COMPUTE_URL ? { computeUrl: e.GCE_COMPUTE_URL } : {}),
        network: e.GCE_NETWORK,
        ...(e.GCE_SUBNETWORK ? { subnetwork: e.GCE_SUBNETWORK } : {}),
        networkTags: e.GCE_NETWORK_TAGS?.length ? e.GCE_NETWORK_TAGS : defaultGceNetworkTags,
      };
    }
  }
  const probeAllow = parseProbeAllowList(e.PROBE_ALLOWED_CIDRS ?? []);
  if (!probeAllow.ok) {
    issues.push(`  PROBE_ALLOWED_CIDRS: not a CIDR (address/bits): ${probeAllow.invalid.join(", ")}`);
  }
  if (issues.length > 0 || !probeAllow.ok) return { ok: false, issues };
  return {
    ok: true,
    settings: {
      subPool,
      ...(subPoolRecheckSeconds === undefined ? {} : { subPoolRecheckSeconds }),
      site: {
        namespace: e.SITE_NAMESPACE ?? ownNamespace(selfUsernames),
        config: {
          imageRegistry: e.SITE_IMAGE_REGISTRY,
          imageTag: e.SITE_IMAGE_TAG,
          apiServerEndpoint: e.SITE_APISERVER_ENDPOINT,
        },
      },
      ...(gce ? { gce } : {}),
      proxy: {
        instanceAllowList: {
          images: e.PROXY_ALLOWED_IMAGES ?? defaultInstanceAllowList.images,
          machineTypes: e.PROXY_ALLOWED_MACHINE_TYPES ?? defaultInstanceAllowList.machineTypes,
          ...(gce ? { zones: gce.zones } : {}),
        },
        probeAllowList: probeAllow.allowList ?? emptyProbeAllowList,
      },
    },
  };
}
