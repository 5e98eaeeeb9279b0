import { readFileSync } from "node:fs";
import {
  type CredentialKind,
  clustersUsableBy,
  type KubefnSettings,
  type ManifestOption,
  manifestDirectoriesOf,
  parseEnvironment,
  SettingsError,
  settingsFrom,
  settingsVariables,
} from "../../shared/app/index.ts";
import { defaultServiceAccountDir, type NodeTransportHttp } from "../../shared/kube/node.ts";
import * as z from "../../shared/zod/index.ts";
import { type ClusterApiSettings, clusterApiVariable } from "./cluster-api-settings.ts";
import { spanExportWanted } from "./span-export.ts";

/** The Node host's settings, parsed once from the environment. */
export interface NodeHostConfig {
  /** Use this cluster, as this kubeconfig's identity. */
  kubeconfig?: string;
  /**
   * No kubeconfig, but `KUBERNETES_SERVICE_HOST` set (a Pod): use the Pod's cluster as its
   * ServiceAccount. With neither, start the embedded devcluster.
   */
  inCluster?: { host: string; port: number; serviceAccountDir: string };
  host: string;
  port: number;
  /**
   * Serve `/metrics` on this port alone (same host), not beside intake and the crawler API: the
   * host profile's NetworkPolicy admits only the scraper there. Unset: on `port`.
   */
  metricsPort?: number;
  /** Keep a series per object on `/metrics` (its gauges); off: bounded by kubefn's code. */
  metricsPerObject: boolean;
  /** Serve HTTPS with this certificate chain and key (PEM files): an OIDC issuer must be https. */
  tls?: { certFile: string; keyFile: string };
  /**
   * Renew the credentials kubefn mints for itself (its OIDC issuer's JWTs). Only tests turn it
   * off, to show a run without renewal fails once the first token expires. Default true.
   */
  renewTokens?: boolean;
  /** Apply infra/crds and infra/rbac at start (always with the embedded devcluster). */
  install: boolean;
  logFormat: "text" | "json";
  /** Directories of manifests the operators declared and the environment named, read at start. */
  manifestDirectories: { option: ManifestOption; dir: string }[];
  /** Export a span per hop over OTLP (an endpoint is set); the SDK reads its own variables. */
  exportSpans: boolean;
  /**
   * Replicas share the sweep through this Lease (one holder sweeps and probes each period). In a
   * Pod by default (`kubefn-sweep` in the Pod's namespace); elsewhere only when
   * `KUBEFN_SWEEP_LEASE` names one. No namespace: the Pod's, or `kubefn-system`.
   */
  sweepLease?: { namespace?: string; name: string };
  /** POST kubefn's state changes as CloudEvents here (`STATE_CHANGES_URL`, `STATE_CHANGES_MODE`). */
  stateChanges?: { url: string; mode: "structured" | "binary" };
  /** How the host's requests reach the API server (see `NodeTransportOptions.http`). */
  kubeHttp: NodeTransportHttp;
  /** Discover more clusters from Cluster API `Cluster` objects (`KUBEFN_CLUSTER_API`). */
  clusterApi?: ClusterApiSettings;
  settings: KubefnSettings;
}

/** The sweep Lease's name where none is given (infra/rbac/kubefn.yaml grants exactly this one). */
export const DEFAULT_SWEEP_LEASE = "kubefn-sweep";

/** The Node host's environment: its own variables and the shared settings. */
export const nodeHostEnvSchema = z.object({
  KUBECONFIG: z.optional(z.string().check(z.minLength(1))),
  /** Set by the kubelet in every Pod. */
  KUBERNETES_SERVICE_HOST: z.optional(z.string().check(z.minLength(1))),
  KUBERNETES_SERVICE_PORT: z._default(
    z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(65535)),
    443,
  ),
  /** The ServiceAccount volume (token, ca.crt, namespace), for tests and unusual mounts. */
  KUBEFN_SERVICE_ACCOUNT_DIR: z._default(z.string().check(z.minLength(1)), defaultServiceAccountDir),
  KUBEFN_HOST: z._default(z.string(), "127.0.0.1"),
  KUBEFN_PORT: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(65535)), 8080),
  KUBEFN_METRICS_PORT: z.optional(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(65535))),
  KUBEFN_METRICS_PER_OBJECT: z._default(z.enum(["true", "false"]), "false"),
  KUBEFN_TLS_CERT_FILE: z.optional(z.string().check(z.minLength(1))),
  KUBEFN_TLS_KEY_FILE: z.optional(z.string().check(z.minLength(1))),
  KUBEFN_INSTALL: z._default(z.enum(["true", "false"]), "false"),
  KUBEFN_LOG_FORMAT: z._default(z.enum(["text", "json"]), "text"),
  KUBEFN_KUBE_HTTP: z._default(z.enum(["http1", "h2"]), "http1"),
  /** Node only (a Worker has no filesystem): the operators' directories of manifests. */
  ...Object.fromEntries(
    manifestDirectoriesOf().map((d) => [d.variable, z.optional(z.string().check(z.minLength(1)))]),
  ),
  /** Read by the OpenTelemetry SDK; set, the host exports spans (see span-export.ts). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.optional(z.string().check(z.minLength(1))),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.optional(z.string().check(z.minLength(1))),
  /** `off`, a Lease name, or `namespace/name`: the Lease the host's replicas share the sweep by. */
  KUBEFN_SWEEP_LEASE: z.optional(
    z.string().check(z.regex(/^(off|([a-z0-9]([-a-z0-9]*[a-z0-9])?\/)?[a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/)),
  ),
  /** A CloudEvents receiver for kubefn's state changes: none are sent when unset. */
  STATE_CHANGES_URL: z.optional(
    z.url({ protocol: /^https?$/, error: "STATE_CHANGES_URL must be an http(s) URL" }),
  ),
  /** Cluster API discovery: the management cluster's credential and the namespaces to watch. */
  KUBEFN_CLUSTER_API: clusterApiVariable,
  STATE_CHANGES_MODE: z._default(z.enum(["structured", "binary"]), "structured"),
  ...settingsVariables,
});

/** The credentials the Node host's declared clusters may use (`KUBEFN_CLUSTERS`). */
export const nodeCredentialKinds: readonly CredentialKind[] = [
  "token",
  "kubeconfig",
  "in-cluster",
  "oidc-issuer",
];

/** {@link nodeHostEnvSchema} with the refusals that span variables. */
const nodeHostEnv = nodeHostEnvSchema.check(
  clustersUsableBy(nodeCredentialKinds),
  z.refine(
    (e) =>
      !e.KUBEFN_CLUSTERS?.some((c) => c.credential.kind === "oidc-issuer") ||
      Boolean(e.OIDC_ISSUER && e.OIDC_SIGNING_KEY),
    {
      message: "a cluster of credential kind oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY",
      path: ["KUBEFN_CLUSTERS"],
    },
  ),
  z.refine(
    (e) =>
      e.KUBEFN_CLUSTER_API?.credential.kind !== "oidc-issuer" || Boolean(e.OIDC_ISSUER && e.OIDC_SIGNING_KEY),
    {
      message: "a management cluster of credential kind oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY",
      path: ["KUBEFN_CLUSTER_API"],
    },
  ),
);

/** Earlier names of two settings, still read. */
const aliases: Record<string, string> = {
  KUBEFN_SWEEP_SECONDS: "SWEEP_PERIOD_SECONDS",
  KUBEFN_CONCURRENCY: "PASS_CONCURRENCY",
};

/**
 * Reads the Node host's settings from the environment, once, at start. The shared settings have
 * the names they have on every platform (`AUDIT_TOKEN`, `SWEEP_PERIOD_SECONDS`, …); here, where
 * the environment is a shell's, each may also carry a `KUBEFN_` prefix, which wins.
 *
 * @throws SettingsError listing every bad variable.
 */
export function parseNodeHostEnv(env: Record<string, string | undefined>): NodeHostConfig {
  const named: Record<string, string | undefined> = {
    ...env,
    KUBEFN_CLUSTERS: clustersText(env.KUBEFN_CLUSTERS),
    KUBEFN_CLUSTER_API: jsonOrFile("KUBEFN_CLUSTER_API", env.KUBEFN_CLUSTER_API, "{"),
  };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === "") continue;
    const shared = aliases[name] ?? name.replace(/^KUBEFN_/, "");
    if (shared !== name && shared in settingsVariables) named[shared] = value;
  }
  const defaults = {
    // The seed's MaxConcurrentReconciles.
    PASS_CONCURRENCY: "3",
    // Listening on loopback (the default: a laptop, the devcluster), the fleet page is open
    // without API_TOKEN; on any other address (a Pod's 0.0.0.0) it is closed like a Worker's.
    FLEET_PAGE: isLoopbackHost(env.KUBEFN_HOST ?? "127.0.0.1") ? "open" : "token",
    // The embedded devcluster is for trying things: sweep (and so probe) every 10 s there.
    SWEEP_PERIOD_SECONDS: env.KUBECONFIG || env.KUBERNETES_SERVICE_HOST ? "60" : "10",
    // The embedded devcluster is a laptop: its probe targets are on loopback. A real
    // cluster (KUBECONFIG, or a Pod's KUBERNETES_SERVICE_HOST) admits no internal destination
    // unless PROBE_ALLOWED_CIDRS says so.
    ...(env.KUBECONFIG || env.KUBERNETES_SERVICE_HOST ? {} : { PROBE_ALLOWED_CIDRS: "127.0.0.0/8,::1/128" }),
  };
  const e = parseEnvironment(nodeHostEnv, named, "invalid environment", defaults);
  if (Boolean(e.KUBEFN_TLS_CERT_FILE) !== Boolean(e.KUBEFN_TLS_KEY_FILE)) {
    throw new SettingsError(
      "invalid environment:\n  KUBEFN_TLS_CERT_FILE and KUBEFN_TLS_KEY_FILE go together",
    );
  }
  const inCluster =
    !e.KUBECONFIG && e.KUBERNETES_SERVICE_HOST
      ? {
          host: e.KUBERNETES_SERVICE_HOST,
          port: e.KUBERNETES_SERVICE_PORT,
          serviceAccountDir: e.KUBEFN_SERVICE_ACCOUNT_DIR,
        }
      : undefined;
  return {
    ...(e.KUBECONFIG ? { kubeconfig: e.KUBECONFIG } : {}),
    ...(inCluster ? { inCluster } : {}),
    host: e.KUBEFN_HOST,
    port: e.KUBEFN_PORT,
    ...(e.KUBEFN_METRICS_PORT !== undefined ? { metricsPort: e.KUBEFN_METRICS_PORT } : {}),
    metricsPerObject: e.KUBEFN_METRICS_PER_OBJECT === "true",
    ...(e.KUBEFN_TLS_CERT_FILE && e.KUBEFN_TLS_KEY_FILE
      ? { tls: { certFile: e.KUBEFN_TLS_CERT_FILE, keyFile: e.KUBEFN_TLS_KEY_FILE } }
      : {}),
    install: e.KUBEFN_INSTALL === "true",
    logFormat: e.KUBEFN_LOG_FORMAT,
    kubeHttp: e.KUBEFN_KUBE_HTTP,
    manifestDirectories: manifestDirectoriesOf().flatMap(({ variable, option }) => {
      const dir = (e as Record<string, unknown>)[variable];
      return typeof dir === "string" ? [{ option, dir }] : [];
    }),
    exportSpans: spanExportWanted(env),
    ...sweepLeaseOf(e.KUBEFN_SWEEP_LEASE ?? (inCluster ? DEFAULT_SWEEP_LEASE : "off")),
    ...(e.STATE_CHANGES_URL
      ? { stateChanges: { url: e.STATE_CHANGES_URL, mode: e.STATE_CHANGES_MODE } }
      : {}),
    ...(e.KUBEFN_CLUSTER_API ? { clusterApi: e.KUBEFN_CLUSTER_API } : {}),
    settings: settingsFrom(e),
  };
}

/**
 * `KUBEFN_CLUSTERS` as JSON: the variable itself when it holds a list, else the file it names.
 *
 * @throws SettingsError when the file cannot be read.
 */
function clustersText(value: string | undefined): string | undefined {
  return jsonOrFile("KUBEFN_CLUSTERS", value, "[");
}

/**
 * A variable holding JSON (starting with `opening`) or naming a file that does.
 *
 * @throws SettingsError when the file cannot be read.
 */
function jsonOrFile(variable: string, value: string | undefined, opening: "[" | "{"): string | undefined {
  if (!value || value.trimStart().startsWith(opening)) return value;
  try {
    return readFileSync(value, "utf8");
  } catch (err) {
    throw new SettingsError(
      `invalid environment:\n  ${variable}: cannot read ${value}: ${(err as Error).message}`,
    );
  }
}

/** Whether a listen address is this machine's loopback only. */
function isLoopbackHost(host: string): boolean {
  return /^127\.\d+\.\d+\.\d+$/.test(host) || host === "::1" || host === "localhost";
}

function sweepLeaseOf(value: string): Pick<NodeHostConfig, "sweepLease"> {
  if (value === "off") return {};
  const [namespace, name] = value.includes("/") ? value.split("/") : [undefined, value];
  return { sweepLease: { ...(namespace ? { namespace } : {}), name: name! } };
}
