/**
 * The proxy operator's settings: the GCE provider (`GCE_*`), what Managed Proxies may run
 * (`PROXY_ALLOWED_*`) and where probes may go (`PROBE_ALLOWED_CIDRS`). Parsed once, at start.
 */

import { parseServiceAccountKey, type ServiceAccountKey } from "../../credentials/index.ts";
import { emptyProbeAllowList, type ProbeAllowList, parseProbeAllowList } from "../../health/index.ts";
import { imageReference } from "../../kube/index.ts";
import * as z from "../../zod/index.ts";
import type { OperatorSettingsDeclaration } from "../operator.ts";
import { defaultInstanceAllowList, type InstanceAllowList } from "./allow-list.ts";

/** A GCE resource name (RFC 1035 label), or a partial URL of such names. */
const gceResourcePath = /^([a-z0-9-]+\/)*[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

export const proxyVariables = {
  GCE_PROJECT: z.optional(z.string().check(z.minLength(1))),
  /** Zones of the project: the first is the default for Proxies naming none; all are listed. */
  GCE_ZONES: z.optional(z.commaList),
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
  GCE_NETWORK_TAGS: z.optional(z.commaList),
  /** Images a Managed Proxy may name (comma-separated; a trailing `*` matches by prefix, `*` alone any). */
  PROXY_ALLOWED_IMAGES: z.optional(z.commaList),
  /**
   * The image of a pod-provider instance whose Proxy names none; this release's forward proxy by
   * default. The release's manifests set it pinned by digest.
   */
  PROXY_POD_IMAGE: z.optional(
    z.string().check(z.regex(imageReference, "PROXY_POD_IMAGE must be an image reference")),
  ),
  /** Machine types a Managed Proxy may name, as PROXY_ALLOWED_IMAGES. */
  PROXY_ALLOWED_MACHINE_TYPES: z.optional(z.commaList),
  /**
   * Loopback, private and link-local CIDRs (comma-separated) a tenant's External endpoint and
   * probe URLs may name; none by default (see shared/health/target.ts). A metadata address only
   * when named alone (/32).
   */
  PROBE_ALLOWED_CIDRS: z.optional(z.commaList),
  /** Drift poll (resync) of Proxies, seconds; the controller's default when unset. */
  PROXY_RESYNC_SECONDS: z.optional(z.coerce.number().check(z.int()).check(z.gte(60)).check(z.lte(86400))),
  /** Compute API base URL; tests point it at a local server. */
  GCE_COMPUTE_URL: z.optional(z.url({ protocol: /^https?$/ })),
};

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

/**
 * What a Managed Proxy may ask its instance to run (zones are GCE_ZONES when set), the internal
 * destinations probes may reach (`PROBE_ALLOWED_CIDRS`), and the GCE provider when configured.
 */
export interface ProxySettings {
  instanceAllowList: InstanceAllowList;
  probeAllowList: ProbeAllowList;
  gce?: GceSettings;
  /** PROXY_RESYNC_SECONDS: the drift poll of Proxies; the controller's default when unset. */
  resyncSeconds?: number;
  /** PROXY_POD_IMAGE: the pod provider's image when a Proxy names none. */
  podImage?: string;
}

/** The network tag of proxy VMs when GCE_NETWORK_TAGS is unset. */
export const defaultGceNetworkTags = ["kubefn-proxy"];

export const proxySettings: OperatorSettingsDeclaration<typeof proxyVariables, ProxySettings> = {
  variables: proxyVariables,
  parse(e) {
    const issues: string[] = [];
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
          issues.push(
            "  GCE_CREDENTIALS: not a service-account key (JSON with client_email and private_key)",
          );
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
        instanceAllowList: {
          images: e.PROXY_ALLOWED_IMAGES ?? defaultInstanceAllowList.images,
          machineTypes: e.PROXY_ALLOWED_MACHINE_TYPES ?? defaultInstanceAllowList.machineTypes,
          ...(gce ? { zones: gce.zones } : {}),
        },
        probeAllowList: probeAllow.allowList ?? emptyProbeAllowList,
        ...(gce ? { gce } : {}),
        ...(e.PROXY_RESYNC_SECONDS ? { resyncSeconds: e.PROXY_RESYNC_SECONDS } : {}),
        ...(e.PROXY_POD_IMAGE ? { podImage: e.PROXY_POD_IMAGE } : {}),
      },
    };
  },
};
