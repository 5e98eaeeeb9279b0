/**
 * Writes docs/settings.md from the settings schema: every variable the shared schema and the Node
 * host read, with the default the schema (or the code behind it) gives and what it means. With
 * `--check`, writes nothing and exits 1 when the committed page differs.
 * test/unit/settings-doc.test.ts fails on the same difference.
 *
 * Names and defaults come from the schema; only the meanings are written here, one row per
 * variable or group: TypeScript refuses a name the schema lacks, and the generator refuses a
 * variable without a row, or a row giving a default in words where the schema has one. A default
 * decided further in (a controller's) is written from that code where it is exported, else in words.
 *
 * Usage: npm run gen:docs [-- --check]
 */
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
// The settings schema: the shared variables, the operators' and the Node host's own.
import { nodeHostEnvSchema } from "../functions/node/config.ts";
import { manifestDirectoriesOf } from "../shared/app/index.ts";
import { operatorVariables } from "../shared/app/operator-settings.ts";
import { settingsVariables } from "../shared/app/settings.ts";
import { defaultInstanceAllowList, minReportIntervalSeconds } from "../shared/controllers/proxy/index.ts";
import { defaultOrphanGraceSeconds } from "../shared/controllers/proxy/orphans/index.ts";
import { defaultOperatorConfig, subPoolRecheckRange } from "../shared/controllers/subpool/index.ts";

export const settingsDocPath = fileURLToPath(new URL("../docs/settings.md", import.meta.url));

type Shared = keyof typeof settingsVariables;
type NodeOwn = Exclude<keyof typeof nodeHostEnvSchema.def.shape, Shared>;

/**
 * One table row: the variables it names, what they mean, and the default column where the schema
 * has no default for them (`unset`: the text says what that means). `note` follows a schema default.
 */
interface Row<Name extends string> {
  names: readonly Name[];
  meaning: string;
  unset?: string;
  note?: string;
}

const tick = (s: string | number) => `\`${s}\``;

const sharedRows: Row<Exclude<Shared, keyof typeof operatorVariables>>[] = [
  {
    names: ["AUDIT_TOKEN"],
    unset: "unset (audit intake off); random with the devcluster",
    meaning: "bearer token the audit webhook presents (at least 16 characters)",
  },
  {
    names: ["RELAY_SECRET"],
    unset: "unset (relay intake off)",
    meaning: "HMAC secret shared with the relay",
  },
  {
    names: ["API_TOKEN"],
    unset: "unset (crawler API off; fleet page as `FLEET_PAGE` says)",
    meaning:
      'crawler credentials for `GET /v1/proxies` and `/v1/leases`: one secret, from which each namespace\'s crawler token is derived (`scripts/crawler-token.ts <namespace>`: an HMAC of the namespace; it sees and leases that namespace only; the secret itself is no crawler credential), or a JSON list of `{ "name", "token", "namespaces": [...] \\| "*", "clusters"?: [...] }`, where `"*"` is the explicit choice of a crawler for every namespace (see [Security](security.md#who-is-trusted-with-what)) and `clusters` limits it to some of `KUBEFN_CLUSTERS` (`scripts/crawler-token.ts <namespace> <cluster>` mints a namespace token for one cluster); the fleet page (`GET /`) then needs the secret or a `"*"` credential for every cluster it shows',
  },
  {
    names: ["FLEET_PAGE"],
    note: "(`open` on a Node host listening on loopback)",
    meaning:
      "who may see the fleet page (`GET /`): `token` — only with a credential of `API_TOKEN` for every namespace, and without `API_TOKEN` not at all (404 saying so), the default where kubefn's URL is public (Workers, Lambda Function URLs); `open` — anyone, without condition messages, unless `API_TOKEN` is set (then as `token`), the default of a Node host listening on loopback (`KUBEFN_HOST`; in a Pod it listens on `0.0.0.0`: `token`); `off` — never",
  },
  {
    names: ["STATUS_SEAL_KEY"],
    unset:
      "derived from `AUDIT_TOKEN`, else `RELAY_SECRET` (not on Lambda, whose reconcile function reads neither); unset with neither (statuses not sealed)",
    meaning:
      "key of the seal (an HMAC) kubefn puts on every status it writes; a status whose seal does not verify — written with kubefn's token outside kubefn — brings a pass that rewrites it (see [Security](security.md#a-status-kubefn-did-not-write)). A platform secret kubefn's Kubernetes identity cannot read, the same on every instance; changing it, or the secret it is derived from, makes every status foreign once (a pass and a Warning Event each). Crawlers are served only sealed statuses. When set, it also keys (under a label of its own) the MAC on the objects kubefn's messages carry over Workers Queues and SQS (the sweep's listed objects, a probe shard's Proxies): without it nothing but keys travels there — passes read what they need and probes run in the sweep, not in probe shards (see [Security](security.md#what-a-message-carries)). A derived key never keys the MAC: whoever holds the audit token or the relay secret could derive it",
  },
  {
    names: ["SELF_USERNAMES"],
    meaning:
      "kubefn's identities, however it authenticates (its ServiceAccount, an EKS role, a Google account, its own OIDC issuer's subject): writes by these are dropped at intake, and the installer (`kubefn install`, the chart's `settings.values.SELF_USERNAMES`) renders the same list into every admission policy's `kubefn-identity` condition and the ConfigMap `kubefn-system/kubefn-status-writers`; `kubefn doctor` checks they agree",
  },
  {
    names: ["KUBEFN_CLUSTERS"],
    unset: "unset (one cluster, `default`, from the platform's own settings)",
    meaning:
      "the clusters one deployment (a Node host, a Worker, a Lambda stack) reconciles: a JSON list (a Worker secret; on Lambda `KUBEFN_CLUSTERS_SECRET_ARN` names a secret holding it; on the Node host also a file holding it) of `{name, server, ca, credential, auditToken, relaySecret}` — `name` a DNS label (the `cluster` of its messages, log lines and metric series; at most 100 clusters), `credential` one of `token`, `kubeconfig`, `in-cluster`, `google`, `eks`, `oidc-issuer` (each platform refuses at start the kinds it cannot use), and each cluster's own intake credentials, by which intake knows a batch's cluster (then `AUDIT_TOKEN` and `RELAY_SECRET` stay unset). See [Deploying: many clusters](deploying/clusters.md)",
  },
  {
    names: ["OIDC_ISSUER", "OIDC_SIGNING_KEY"],
    unset: "unset (kubefn is no OIDC issuer; it authenticates as its platform gives it)",
    meaning:
      "kubefn as its own OIDC issuer ([Deploying: kubefn as its own OIDC issuer](deploying/oidc-issuer.md)): the https URL it is reached at (it serves `/.well-known/openid-configuration` and `/openid/v1/jwks` there), and the private JWK (EC P-256 or RSA, with a `kid`) or JWK set, from the platform's secret store, whose first key signs the short-lived JWTs it authenticates to the API server with (every key is published: rotation)",
  },
  {
    names: ["OIDC_AUDIENCE", "OIDC_SUBJECT", "OIDC_TOKEN_SECONDS"],
    meaning:
      "the JWTs' `aud` (the JWT authenticator's audience), `sub` (mapped to kubefn's username, which `SELF_USERNAMES` must list) and validity; renewed when a fifth of it is left",
  },
  {
    names: ["MAX_BODY_BYTES", "REPLAY_WINDOW_SECONDS"],
    meaning: "intake body cap; relay signature replay window",
  },
  {
    names: ["SWEEP_PERIOD_SECONDS"],
    note: "(`10` on the devcluster)",
    meaning:
      "sweep period: health probes each sweep; drift lists once per drift period (slots are at least a minute long); at least 60 on Workers and Lambda, whose schedules run every minute",
  },
  {
    names: ["ADMISSION_RECHECK_SECONDS"],
    meaning:
      "kubefn reconciles only while its admission policies (infra/rbac) are installed and bound: checked with two list requests at most once per this many seconds per process or isolate (and at each sweep); while they are missing (or the lists are refused), passes wait this long and ask again, the sweep is held back, and `kubefn_admission_policies_ready` is 0. A check the API server does not answer (5xx, a timeout) keeps the last answer for up to five periods and is made again after 5 s. There is no switch to turn the check off",
  },
  {
    names: ["STATE_CHANGES_PER_INVOCATION"],
    meaning:
      'state changes (a Proxy Ready or Unhealthy, an instance replaced, a SubPool Ready or refused, a Site component\'s condition, the admission gate closed) one invocation publishes at most; the rest are dropped and counted (`kubefn_state_changes_dropped_total{reason="bound"}`). Only where a sink is named: `STATE_CHANGES_BUS` (Lambda), the `STATE_CHANGES` queue binding (Workers), `STATE_CHANGES_URL` (Node host); see [State changes](monitoring.md#state-changes)',
  },
  {
    names: ["MIN_REPORT_SECONDS"],
    unset: tick(minReportIntervalSeconds),
    meaning:
      "least time between two latency reports of one Proxy (verdict flips are reported at once); a latency report also needs three probes in a row, a second apart, all outside the band (see [the Proxy operator](operators/proxy.md#health-reports))",
  },
  {
    names: ["ORPHAN_GRACE_SECONDS"],
    unset: tick(defaultOrphanGraceSeconds),
    meaning: "age before an untracked tagged instance is deleted",
  },
  {
    names: ["PROBE_CONCURRENCY"],
    note: "(`6` on Workers)",
    meaning: "probes in flight during a sweep or a probe shard",
  },
  {
    names: ["PROBE_NAMESPACE_CONCURRENCY"],
    unset: "half of `PROBE_CONCURRENCY`, rounded up (16; 3 on Workers)",
    meaning:
      "probes in flight per namespace, per instance across its sweeps and shards (on Workers, per queue invocation): one tenant's hanging targets hold at most this many probe slots, so other namespaces' Proxies keep their cadence; a fleet in one namespace probes at most this many at once (set it to `PROBE_CONCURRENCY` for a single-tenant cluster)",
  },
  {
    names: ["PUBSUB_AUDIENCE", "PUBSUB_SERVICE_ACCOUNT"],
    unset: "unset (Pub/Sub intake off)",
    meaning:
      "GKE audit logs by Pub/Sub push: the push subscription's token audience and service account (see [Deploying: GKE](deploying/README.md#gke-log-router-to-pubsub-push))",
  },
  {
    names: ["PUBSUB_JWKS_URL", "PUBSUB_JWKS"],
    unset: "Google's keys",
    meaning:
      "where the push tokens' signing keys come from: an https URL (http only to loopback), or the JWKS inline",
  },
  {
    names: ["PASS_CONCURRENCY"],
    note: "(`3` on the Node host, the seed's MaxConcurrentReconciles)",
    meaning: "passes at once per Lambda event / in the Node host's queue (one per key at most there)",
  },
  {
    names: ["REQUEST_BUDGET"],
    meaning:
      "API requests one platform invocation may send across its passes (a Workers queue batch or cron run, a Lambda event, a Node host pass or sweep); past it each pass ends as a transient error (`RequestBudgetExhausted`) and retries with backoff",
  },
  {
    names: ["CIRCUIT_FAILURES", "CIRCUIT_OPEN_SECONDS"],
    meaning:
      "after this many API failures in a row (5xx, 429, no answer) no request is sent for this long (doubling while trials fail, up to 60 s, at least the server's Retry-After); passes end as `CircuitOpen` and retry after it",
  },
  { names: ["KUBE_TIMEOUT_SECONDS"], meaning: "deadline of one API request" },
  {
    names: ["LOG_LEVEL"],
    meaning:
      "least severe level logged: `debug`, `info`, `warn` or `error` (each keeps its own lines and the more severe ones)",
  },
  {
    names: ["PROBE_SHARD_SIZE"],
    note: "(each Proxy probed every `intervalSeconds` at its own phase, on every platform); `0` probes in the sweep",
    meaning: "fan health probes out as probe-shard messages of this many Proxies",
  },
];

const operatorRows: Row<keyof typeof operatorVariables>[] = [
  {
    names: ["SUBPOOL_MAX_CPU", "SUBPOOL_MAX_MEMORY"],
    unset: `${tick(defaultOperatorConfig.envelope.cpu)}, ${tick(defaultOperatorConfig.envelope.memory)}`,
    meaning:
      "envelope of a SubPool's cpa + cpaManager requests; lowering it refuses growth, never a running pool (keep the ConfigMap `kubefn-system/kubefn-subpool-limits` at least this: the API server refuses kubefn's SubPool workloads and quotas above it; a Node host that installs keeps it equal)",
  },
  {
    names: ["SUBPOOL_GATEWAY"],
    unset: "unset",
    meaning: "`namespace/name` of the Gateway HTTPRoutes attach to by default",
  },
  {
    names: ["SUBPOOL_HOSTNAME_SUFFIX"],
    unset: "unset",
    meaning:
      "Gateway-mode hostnames default to `<pool>.<suffix>` (list `*.<suffix>` in the ConfigMap `kubefn-system/kubefn-subpool-hostnames`, and any other hostname a pool may serve under its name: the API server refuses kubefn's HTTPRoutes for others)",
  },
  {
    names: ["SUBPOOL_PROXY_GATEWAY"],
    unset: tick(
      `${defaultOperatorConfig.proxyGateway.namespace}/${defaultOperatorConfig.proxyGateway.service}`,
    ),
    meaning: "`namespace/service` of the shared proxy gateway",
  },
  {
    names: ["SUBPOOL_RECHECK_SECONDS"],
    unset: "unset: the shared Gateway and proxy gateway are looked at every 30 s for all pools together",
    meaning: `a look at every active SubPool this often (${subPoolRecheckRange.min}–${subPoolRecheckRange.max}; a pass per pool per period, beside the shared look; from the drift period up, the drift pass already looks that often and the setting changes nothing; a bad value stops SubPools only)`,
  },
  {
    names: ["SITE_IMAGE_REGISTRY", "SITE_IMAGE_TAG"],
    meaning:
      "images of the Site components (`<registry>/<component>:<tag>`; keep the ConfigMap `kubefn-system/kubefn-site-images` listing them)",
  },
  { names: ["SITE_APISERVER_ENDPOINT"], meaning: "written into the machina, net and metalman configs" },
  {
    names: ["SITE_NAMESPACE"],
    unset: "kubefn's own (from `SELF_USERNAMES`)",
    meaning: "where Site components install",
  },
  {
    names: ["GCE_PROJECT", "GCE_ZONES"],
    unset: "unset (no `gce` provider)",
    meaning: "project and comma-separated zones of `provider: gce` Proxies",
  },
  {
    names: ["GCE_CREDENTIALS"],
    unset: "unset",
    meaning:
      "service-account key JSON, from the platform's secret store (Workers secret, Secrets Manager on Lambda)",
  },
  {
    names: ["GCE_NETWORK"],
    unset:
      "required with `GCE_PROJECT` (no default: write `default` to choose the project's default network)",
    meaning:
      "VPC network of proxy VMs, a name or `projects/<p>/global/networks/<n>`: one of their own, whose firewall denies egress to internal ranges ([GCE network](deploying/gce.md))",
  },
  {
    names: ["GCE_SUBNETWORK"],
    unset: "unset (the network's subnetwork in the VM's region)",
    meaning: "its subnetwork: a name (in the region of the VM's zone) or `regions/<r>/subnetworks/<s>`",
  },
  {
    names: ["GCE_NETWORK_TAGS"],
    unset: "`kubefn-proxy`",
    meaning: "comma-separated network tags on every proxy VM, which the firewall rules target",
  },
  {
    names: ["GCE_COMPUTE_URL"],
    unset: "unset (Google's Compute Engine API)",
    meaning: "base URL of the Compute Engine API; the tests point it at a local server",
  },
  {
    names: ["PROBE_ALLOWED_CIDRS"],
    unset: "unset (none; `127.0.0.0/8,::1/128` on the embedded devcluster of `npm start`)",
    meaning:
      "comma-separated CIDRs a tenant's External `spec.endpoint.host` and probe URLs may name although they are loopback, private (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) or link-local; a metadata address (169.254.169.254, 168.63.129.16, fd00:ec2::254) only when named alone; a Managed instance's own address is always probed",
  },
  {
    names: ["PROXY_RESYNC_SECONDS"],
    unset: "`300`",
    meaning: "drift period of Proxies: how often the sweep lists their provider instances and decides",
  },
  {
    names: ["PROXY_ALLOWED_IMAGES"],
    unset: defaultInstanceAllowList.images.map(tick).join(", "),
    meaning:
      "comma-separated images a Managed Proxy may name in `spec.instance.image` (a trailing `*` matches by prefix, `*` alone anything); naming none (the provider's default) is always allowed; the pod provider's Pods are admitted only with images the ConfigMap `kubefn-system/kubefn-proxy-images` lists (same syntax)",
  },
  {
    names: ["PROXY_POD_IMAGE"],
    unset: "`ghcr.io/kubefn/forward-proxy:<this release>`",
    meaning:
      "the image of a pod-provider instance whose Proxy names none; the release's host.yaml, chart, Worker settings and Lambda template set it pinned by digest. Listed in `kubefn-proxy-images` by an installing host; elsewhere list it there yourself when it is not kubefn's",
  },
  {
    names: ["PROXY_ALLOWED_MACHINE_TYPES"],
    unset: defaultInstanceAllowList.machineTypes.map(tick).join(", "),
    meaning: "the same for `spec.instance.machineType`; a Proxy may name only a zone of `GCE_ZONES`",
  },
];

const nodeOwnRows: Row<NodeOwn>[] = [
  {
    names: ["KUBECONFIG"],
    unset: "unset → the Pod's cluster in a Pod, else the embedded devcluster",
    meaning: "cluster to reconcile",
  },
  {
    names: ["KUBERNETES_SERVICE_HOST"],
    unset: "set by the kubelet in every Pod",
    meaning:
      "without `KUBECONFIG`: reconcile as the Pod's ServiceAccount ([the Node host's identity](deploying/node-identity.md))",
  },
  {
    names: ["KUBERNETES_SERVICE_PORT", "KUBEFN_SERVICE_ACCOUNT_DIR"],
    meaning:
      "in a Pod: the API server's port; the directory holding the ServiceAccount's `token`, `ca.crt` and `namespace`",
  },
  {
    names: ["KUBEFN_HOST", "KUBEFN_PORT"],
    meaning:
      "HTTP listener (intake, `/metrics` unless `KUBEFN_METRICS_PORT`, `/healthz`, crawler API, the fleet page at `/`)",
  },
  {
    names: ["KUBEFN_METRICS_PORT"],
    unset: "unset (`/metrics` on `KUBEFN_PORT`); 9090 in `infra/host/` and the chart",
    meaning:
      "serve `/metrics` alone on this port (same host), for a NetworkPolicy to admit only the scraper there ([Monitoring](monitoring.md))",
  },
  {
    names: ["KUBEFN_METRICS_PER_OBJECT"],
    meaning:
      "`true`: a series per object on `/metrics` (an operator's gauges of each primary: the Proxies' `kubefn_proxy_probe_success` and `kubefn_proxy_last_probe_timestamp_seconds`); `false`: none, the series bounded by kubefn's code (a gauge declared latest-of-any stays as one series)",
  },
  {
    names: ["KUBEFN_TLS_CERT_FILE", "KUBEFN_TLS_KEY_FILE"],
    unset: "unset (plain HTTP)",
    meaning:
      "serve HTTPS with this PEM certificate chain and key (both or neither): the host as its own OIDC issuer must be reached over https",
  },
  { names: ["KUBEFN_INSTALL"], meaning: "apply `infra/crds` and `infra/rbac` to `KUBECONFIG`'s cluster" },
  { names: ["KUBEFN_LOG_FORMAT"], meaning: "`text` or `json`" },
  {
    names: ["KUBEFN_KUBE_HTTP"],
    meaning:
      "how the host's requests reach the API server (undici): `http1` HTTP/1.1 keep-alive connections, one per concurrent request (on the fleet bench the least CPU per pass); `h2` offers HTTP/2 and multiplexes concurrent requests on one connection, as client-go does (1 connection to the API server instead of ~40 while a fleet converges; HTTP/1.1 where the server does not take it) ([Performance](performance.md#kube-transport))",
  },
  {
    names: ["KUBEFN_SWEEP_LEASE"],
    unset: "`kubefn-sweep` in a Pod, else `off`",
    meaning:
      "the Lease the host's replicas share the sweep through (one holder sweeps and probes a period): `off`, a name (in the Pod's namespace, else `kubefn-system`) or `namespace/name` ([Replicas](deploying/node.md#replicas))",
  },
  {
    names: ["KUBEFN_CLUSTER_API"],
    unset: "unset (no discovery)",
    meaning:
      "discover more clusters from Cluster API `Cluster` objects in a management cluster, while the host runs: a JSON object, or a file holding one, of `{server, ca, credential, namespaces, resyncSeconds}` — `credential` as in `KUBEFN_CLUSTERS` (reaching the management cluster), `namespaces` the ones watched, `resyncSeconds` (10–3600, default 300) how often every `Cluster` and its Secrets are read again besides the watch ([Discover clusters from Cluster API](deploying/clusters.md#discover-clusters-from-cluster-api))",
  },
  {
    names: ["STATE_CHANGES_URL"],
    unset: "unset (no state changes are sent)",
    meaning:
      "a CloudEvents receiver (a Knative broker, Argo Events' webhook) that kubefn's state changes are POSTed to, one CloudEvent each ([State changes](monitoring.md#state-changes))",
  },
  {
    names: ["STATE_CHANGES_MODE"],
    meaning:
      "`structured` (the event as `application/cloudevents+json`) or `binary` (`ce-*` headers, the detail as the body)",
  },
  {
    names: ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"],
    unset: "unset (no span export; the OpenTelemetry SDK is not loaded)",
    meaning:
      "an OTLP/HTTP collector (`http://collector:4318`; the traces one names the full URL, `…/v1/traces`): the host exports a span per intake batch, pass, job and sweep, with the trace and span ids of its log lines ([Traces](monitoring.md#traces)); the SDK also reads `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` (default `kubefn`), `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_SDK_DISABLED=true` turns export off",
  },
];

/** The Node host's rows: its own, then each operator's directories of manifests. */
const nodeRows: Row<string>[] = [
  ...nodeOwnRows,
  ...manifestDirectoriesOf().map((d) => ({
    names: [d.variable],
    unset: "unset (the manifests embedded in the code)",
    meaning: d.meaning,
  })),
];

/** The schema's default of one variable, in the environment's string form; undefined when it has none. */
function schemaDefault(name: string): string | undefined {
  const schema = (nodeHostEnvSchema.def.shape as Record<string, { safeParse(v: unknown): unknown }>)[name];
  if (!schema) throw new Error(`${name} is not in the schema`);
  const parsed = schema.safeParse(undefined) as { success: boolean; data?: unknown };
  const value = parsed.success ? parsed.data : undefined;
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(",") : String(value);
}

function table(rows: readonly Row<string>[]): string {
  const lines = ["| variable | default | meaning |", "| --- | --- | --- |"];
  for (const row of rows) {
    const defaults = row.names.map(schemaDefault);
    let cell: string;
    if (defaults.every((d) => d !== undefined)) {
      if (row.unset) throw new Error(`${row.names.join(", ")}: the schema gives the default; drop "unset"`);
      cell = defaults.map((d) => tick(d)).join(", ") + (row.note ? ` ${row.note}` : "");
    } else {
      if (!row.unset) throw new Error(`${row.names.join(", ")}: no schema default; say what unset means`);
      if (defaults.some((d) => d !== undefined))
        throw new Error(`${row.names.join(", ")}: mixes schema defaults and none; split the row`);
      cell = row.unset;
    }
    lines.push(`| ${row.names.map(tick).join(", ")} | ${cell} | ${row.meaning} |`);
  }
  return lines.join("\n");
}

/** Every variable of `names` is in exactly one row of `rows`. */
function covers(what: string, names: readonly string[], rows: readonly Row<string>[]): void {
  const listed = rows.flatMap((r) => r.names);
  const missing = names.filter((n) => !listed.includes(n));
  const twice = listed.filter((n, i) => listed.indexOf(n) !== i);
  if (missing.length > 0 || twice.length > 0)
    throw new Error(
      `${what}: missing ${missing.join(", ") || "none"}; listed twice ${twice.join(", ") || "none"}`,
    );
}

/** The text of docs/settings.md. */
export function settingsDoc(): string {
  const operatorNames = Object.keys(operatorVariables);
  const sharedNames = Object.keys(settingsVariables).filter((n) => !operatorNames.includes(n));
  const nodeNames = Object.keys(nodeHostEnvSchema.def.shape).filter((n) => !(n in settingsVariables));
  covers("shared settings", sharedNames, sharedRows);
  covers("operator settings", operatorNames, operatorRows);
  covers("Node host settings", nodeNames, nodeRows);
  return `<!-- Generated by \`npm run gen:docs\` (scripts/gen-settings-doc.ts) from the settings schema. Edit the generator, not this page. -->

# Settings

One schema, read under the same names on every platform (Workers \`[vars]\` and secrets, the Lambda
environment, the Node host's environment — where each name may also carry a \`KUBEFN_\` prefix,
which wins), parsed once at start; a bad value stops it with one message listing them all.

## Every platform

${table(sharedRows)}

## Operator settings (every platform)

Part of the same schema (and the same rules) as the table above. Why they are start-up settings:
[Architecture, Decisions](architecture.md#decisions).

${table(operatorRows)}

## The Node host's own variables

${table(nodeRows)}

\`KUBEFN_SWEEP_SECONDS\` and \`KUBEFN_CONCURRENCY\`, the earlier names of \`SWEEP_PERIOD_SECONDS\` and
\`PASS_CONCURRENCY\` on the Node host, are still read.

## Each platform's own variables

Where the cluster and the queue are: [Cloudflare Workers](deploying/cloudflare.md#settings)
(\`KUBE_SERVER\`, \`KUBE_TOKEN\`), [AWS Lambda](deploying/aws.md#settings) (the kubeconfig's secret,
the bus, the schedule group).
`;
}

async function main(argv: string[]): Promise<number> {
  const text = settingsDoc();
  if (argv.includes("--check")) {
    const committed = await readFile(settingsDocPath, "utf8").catch(() => "");
    if (committed === text) return 0;
    console.error("docs/settings.md differs from the settings schema: run npm run gen:docs");
    return 1;
  }
  await writeFile(settingsDocPath, text);
  console.log("wrote docs/settings.md");
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}
