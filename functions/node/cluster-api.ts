/**
 * Cluster API discovery on the Node host (`KUBEFN_CLUSTER_API`): the clusters of a management
 * cluster's `Cluster` objects (cluster.x-k8s.io/v1beta1) join the fleet once provisioned, each
 * through its kubeconfig Secret (`<name>-kubeconfig`, key `value`, Cluster API's convention), and
 * leave it when their `Cluster` is deleted — as multicluster-runtime's Cluster API provider engages
 * and disengages them, without a restart.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Watch } from "@kubernetes/client-node";
import { parse as parseYaml } from "yaml";
import { clusterLog, type IntakeCredentials, type Log, type Metrics } from "../../shared/app/index.ts";
import { type ClusterDeclaration, clusterNameSchema, MAX_CLUSTERS } from "../../shared/credentials/index.ts";
import {
  createEventRecorder,
  createKube,
  type EventRecorder,
  isNotFound,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import * as z from "../../shared/zod/index.ts";
import { type ClusterConnection, connectionOf, connectKubeconfigText } from "./cluster.ts";
import type { ClusterApiSettings } from "./cluster-api-settings.ts";
import type { NodeHostConfig } from "./config.ts";
import type { Fleet } from "./fleet.ts";

/** Cluster API's `Cluster` kind. */
export const capiClusterResource: Resource = {
  group: "cluster.x-k8s.io",
  version: "v1beta1",
  resource: "clusters",
  kind: "Cluster",
  namespaced: true,
};

/** The Secret beside a `Cluster` holding its kubeconfig (key `value`), as Cluster API names it. */
export const kubeconfigSecretName = (cluster: string) => `${cluster}-kubeconfig`;

/**
 * kubefn's own Secret beside a `Cluster` (optional): key `kubeconfig`, a kubeconfig for kubefn's
 * ServiceAccount in that cluster, used instead of Cluster API's (an admin's); keys `auditToken`
 * and `relaySecret`, that cluster's intake credentials. Without them intake is off for that
 * cluster and its sweep alone brings its changes.
 */
export const kubefnSecretName = (cluster: string) => `${cluster}-kubefn`;

/** Why a `Cluster` is not reconciled: a stable reason (its Event's) and a note for people. */
export interface Refusal {
  reason:
    | "NameInvalid"
    | "NameClash"
    | "KubeconfigInvalid"
    | "IntakeSecretInvalid"
    | "IntakeCredentialInUse"
    | "TooManyClusters";
  note: string;
}

/**
 * A kubeconfig from a Secret, reduced to what kubefn will use of it — the current context's server
 * (https), its CA data and TLS server name, and a bearer token or a client certificate and key
 * (data) — as a kubeconfig of its own (JSON), or why not. Whoever can write the Secret must not
 * steer the host: an exec plugin or auth provider (a command the host would run), a file path (a
 * file the host would read), a forwarding hop, impersonation or skipped TLS verification are refused.
 */
export function vetKubeconfig(text: string): { kubeconfig: string } | { refusal: Refusal } {
  const refuse = (note: string) => ({ refusal: { reason: "KubeconfigInvalid", note } }) as const;
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch {
    return refuse("its key value is not YAML");
  }
  const parsed = kubeconfigSchema.safeParse(doc);
  if (!parsed.success) return refuse(`not a kubeconfig kubefn uses: ${z.prettifyError(parsed.error)}`);
  const kc = parsed.data;
  const context = kc.contexts.find((c) => c.name === kc["current-context"])?.context;
  if (!context) return refuse(`its current-context ${kc["current-context"]} is not among its contexts`);
  const cluster = kc.clusters.find((c) => c.name === context.cluster)?.cluster;
  const user = kc.users.find((u) => u.name === context.user)?.user;
  if (!cluster || !user) return refuse("its current context names a cluster or user it does not have");
  const { token, "client-certificate-data": cert, "client-key-data": key } = user;
  if (token === undefined && (cert === undefined || key === undefined))
    return refuse("its user has neither a token nor client-certificate-data and client-key-data");
  return {
    kubeconfig: JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "cluster", cluster }],
      users: [{ name: "kubefn", user }],
      contexts: [{ name: "cluster", context: { cluster: "cluster", user: "kubefn" } }],
      "current-context": "cluster",
    }),
  };
}

/** Strict where it matters: a cluster or user with any field beyond these is refused. */
const kubeconfigSchema = z.object({
  "current-context": z.string().check(z.minLength(1)),
  clusters: z.array(
    z.object({
      name: z.string(),
      cluster: z.strictObject({
        server: z.url({ protocol: /^https$/, error: "server must be an https URL" }),
        "certificate-authority-data": z.optional(z.string().check(z.minLength(1))),
        "tls-server-name": z.optional(z.string().check(z.minLength(1))),
      }),
    }),
  ),
  users: z.array(
    z.object({
      name: z.string(),
      user: z.strictObject({
        token: z.optional(z.string().check(z.minLength(1))),
        "client-certificate-data": z.optional(z.string().check(z.minLength(1))),
        "client-key-data": z.optional(z.string().check(z.minLength(1))),
      }),
    }),
  ),
  contexts: z.array(
    z.object({ name: z.string(), context: z.object({ cluster: z.string(), user: z.string() }) }),
  ),
});

const intakeSecret = z.optional(z.string().check(z.minLength(16, "must be at least 16 characters")));

/** A Secret's intake credentials (`auditToken`, `relaySecret`), or why not. */
export function intakeCredentialsOf(
  data: Record<string, string> | undefined,
): { credentials: IntakeCredentials } | { refusal: Refusal } {
  const decoded = Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
  );
  const parsed = z
    .object({ auditToken: intakeSecret, relaySecret: intakeSecret })
    .safeParse({ auditToken: decoded.auditToken, relaySecret: decoded.relaySecret });
  if (!parsed.success)
    return {
      refusal: {
        reason: "IntakeSecretInvalid",
        note: `its keys auditToken and relaySecret must be at least 16 characters each (${z.prettifyError(parsed.error)})`,
      },
    };
  const { auditToken, relaySecret } = parsed.data;
  return {
    credentials: { ...(auditToken ? { auditToken } : {}), ...(relaySecret ? { relaySecret } : {}) },
  };
}

/** One provisioned `Cluster` whose Secrets were read and vetted: a fleet member to be. */
export interface Candidate {
  /** `namespace/name` of its `Cluster` object. */
  key: string;
  /** Its `cluster` in the fleet: the `Cluster` object's name. */
  name: string;
  /** When its `Cluster` was created: the older of two same-named ones wins. */
  created: string;
  kubeconfig: string;
  credentials: IntakeCredentials;
  /** Of its kubeconfig and credentials: a change restarts its reconciler. */
  hash: string;
}

/** A discovered cluster the fleet runs, as discovery started it. */
export interface Engaged {
  key: string;
  hash: string;
}

/** What to do: stop (by name), start, and what to refuse and why. */
export interface DiscoveryPlan {
  stop: string[];
  start: Candidate[];
  refuse: { key: string; refusal: Refusal }[];
}

/**
 * The pure decision: which discovered clusters to stop and start, given the candidates read now,
 * the `Cluster` keys whose state could not be read (`unknown`: whatever runs for them keeps
 * running), the discovered clusters running, and the declared ones (their names and intake
 * credentials). A name declared in `KUBEFN_CLUSTERS` or held by an older `Cluster` is refused, so
 * is an intake credential another cluster holds (intake knows a batch's cluster by it), and any
 * cluster past {@link MAX_CLUSTERS} (every series carries the name).
 */
export function planDiscovery(
  candidates: readonly Candidate[],
  unknown: ReadonlySet<string>,
  engaged: ReadonlyMap<string, Engaged>,
  declared: readonly { name: string; credentials: IntakeCredentials }[],
  maxClusters = MAX_CLUSTERS,
): DiscoveryPlan {
  const plan: DiscoveryPlan = { stop: [], start: [], refuse: [] };
  const taken = new Map<string, string>(declared.map((d) => [d.name, "KUBEFN_CLUSTERS"]));
  const secrets = new Set(declared.flatMap((d) => credentialValues(d.credentials)));
  const keep = new Set<string>();
  // Those running whose Cluster could not be read hold their name and credentials.
  for (const [name, e] of engaged) {
    if (!unknown.has(e.key)) continue;
    keep.add(name);
    taken.set(name, e.key);
  }
  const ordered = [...candidates].sort(
    (a, b) => a.created.localeCompare(b.created) || a.key.localeCompare(b.key),
  );
  let count = declared.length + keep.size;
  for (const c of ordered) {
    const holder = taken.get(c.name);
    if (holder !== undefined) {
      plan.refuse.push({
        key: c.key,
        refusal: {
          reason: "NameClash",
          note:
            holder === "KUBEFN_CLUSTERS"
              ? `a cluster named ${c.name} is declared in KUBEFN_CLUSTERS`
              : `Cluster ${holder} holds the name ${c.name} in the fleet`,
        },
      });
      continue;
    }
    const values = credentialValues(c.credentials);
    if (values.some((v) => secrets.has(v))) {
      plan.refuse.push({
        key: c.key,
        refusal: {
          reason: "IntakeCredentialInUse",
          note: "its auditToken or relaySecret is another cluster's: each cluster's must be its own",
        },
      });
      continue;
    }
    if (count >= maxClusters) {
      plan.refuse.push({
        key: c.key,
        refusal: { reason: "TooManyClusters", note: `the fleet has ${maxClusters} clusters, its most` },
      });
      continue;
    }
    count++;
    taken.set(c.name, c.key);
    for (const v of values) secrets.add(v);
    keep.add(c.name);
    const running = engaged.get(c.name);
    if (running?.key === c.key && running.hash === c.hash) continue;
    if (running) plan.stop.push(c.name);
    plan.start.push(c);
  }
  for (const name of engaged.keys()) if (!keep.has(name)) plan.stop.push(name);
  return plan;
}

function credentialValues(c: IntakeCredentials): string[] {
  return [c.auditToken, c.relaySecret].filter((s): s is string => s !== undefined);
}

/** What one read of a `Cluster` and its Secrets came to. */
export type ClusterState =
  | { kind: "candidate"; candidate: Candidate }
  /** Not provisioned yet, being deleted, or its kubeconfig Secret not there yet: not reconciled. */
  | { kind: "waiting"; key: string; why: string }
  | { kind: "refused"; key: string; refusal: Refusal }
  /** A read failed (not a 404): whatever runs for it keeps running. */
  | { kind: "unknown"; key: string; error: string };

/**
 * Reads one `Cluster`'s state: provisioned (`status.phase` Provisioned, as multicluster-runtime's
 * provider asks) and not being deleted, its name a DNS label, its kubeconfig there and vetted —
 * kubefn's own Secret's (`<name>-kubefn`, key `kubeconfig`) if it has one, else Cluster API's
 * (`<name>-kubeconfig`, key `value`) — and the intake credentials of kubefn's Secret valid.
 */
export async function readClusterState(kube: Kube, cluster: KubeObject): Promise<ClusterState> {
  const namespace = cluster.metadata.namespace ?? "";
  const name = cluster.metadata.name ?? "";
  const key = `${namespace}/${name}`;
  if (!clusterNameSchema.safeParse(name).success)
    return {
      kind: "refused",
      key,
      refusal: {
        reason: "NameInvalid",
        note: "its name must be a DNS label (a-z, 0-9, -; at most 63) to name a cluster",
      },
    };
  if (cluster.metadata.deletionTimestamp) return { kind: "waiting", key, why: "being deleted" };
  const phase = (cluster.status as { phase?: unknown } | undefined)?.phase;
  if (phase !== "Provisioned")
    return { kind: "waiting", key, why: `phase ${String(phase ?? "unset")}, not Provisioned` };
  const secret = (secretName: string) =>
    kube.get(Resources.Secret, { namespace, name: secretName }).then(
      (s) => (s.data ?? {}) as Record<string, string>,
      (err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      },
    );
  let own: Record<string, string> | undefined;
  let capi: Record<string, string> | undefined;
  try {
    own = await secret(kubefnSecretName(name));
    if (own?.kubeconfig === undefined) {
      capi = await secret(kubeconfigSecretName(name));
      if (capi === undefined)
        return { kind: "waiting", key, why: `no Secret ${kubeconfigSecretName(name)} yet` };
    }
  } catch (err) {
    return { kind: "unknown", key, error: String(err) };
  }
  const encoded = own?.kubeconfig ?? capi?.value;
  if (encoded === undefined)
    return {
      kind: "refused",
      key,
      refusal: { reason: "KubeconfigInvalid", note: `Secret ${kubeconfigSecretName(name)} has no key value` },
    };
  const text = Buffer.from(encoded, "base64").toString("utf8");
  const vetted = vetKubeconfig(text);
  if ("refusal" in vetted) return { kind: "refused", key, refusal: vetted.refusal };
  const intake = intakeCredentialsOf(own);
  if ("refusal" in intake) return { kind: "refused", key, refusal: intake.refusal };
  const hash = createHash("sha256")
    .update(vetted.kubeconfig)
    .update("\0")
    .update(JSON.stringify(intake.credentials))
    .digest("hex");
  return {
    kind: "candidate",
    candidate: {
      key,
      name,
      created: cluster.metadata.creationTimestamp ?? "",
      kubeconfig: vetted.kubeconfig,
      credentials: intake.credentials,
      hash,
    },
  };
}

/** Discovery, running: `stop` ends its watches and timer (the fleet's clusters stay). */
export interface ClusterApiDiscovery {
  /** Reads every `Cluster` now and acts on it (the watch and the timer call it too). */
  sync(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts discovery: one watch of `Cluster` objects per namespace (each event, and each watch
 * re-established, brings a sync), and a sync every `resyncSeconds` besides (a Secret created after
 * its `Cluster`, a rotated kubeconfig). A sync lists the `Cluster`s, reads the Secrets of each
 * provisioned one by name (never lists Secrets), plans ({@link planDiscovery}) and acts: stops
 * before it starts, says each refusal once in a warning and a Warning Event on the `Cluster`.
 * The first sync has run when this resolves.
 *
 * Caveats: a sync that cannot list a namespace changes nothing for that namespace's clusters; a
 * cluster that cannot be connected is tried again at the next sync.
 */
export async function startClusterApiDiscovery(opts: {
  config: NodeHostConfig;
  settings: ClusterApiSettings;
  fleet: Pick<Fleet, "add" | "remove">;
  /** The declared clusters: their names and intake credentials are not discovered again. */
  declared: readonly ClusterDeclaration[];
  log: Log;
  metrics: Pick<Metrics, "gauge">;
  /** The management cluster's connection; by default from `settings`. */
  connection?: ClusterConnection;
}): Promise<ClusterApiDiscovery> {
  const { config, settings, fleet, log, metrics } = opts;
  const connection = opts.connection ?? connectionOf({ name: "cluster-api", ...settings }, config, log);
  const kube = createKube(
    createNodeTransport(connection.kc, {
      timeoutMs: config.settings.kubeTimeoutMs,
      ...(connection.tokenSource ? { tokenSource: connection.tokenSource } : {}),
    }),
    { fieldManager: "kubefn" },
  );
  const events: EventRecorder = createEventRecorder(kube, {
    controller: "kubefn.dev/cluster-api",
    now: () => new Date(),
    onError: (err, event) =>
      log.warn("could not write an Event on a Cluster", { reason: event.reason, error: String(err) }),
  });
  const declared = opts.declared.map((d) => ({
    name: d.name,
    credentials: {
      ...(d.auditToken ? { auditToken: d.auditToken } : {}),
      ...(d.relaySecret ? { relaySecret: d.relaySecret } : {}),
    },
  }));
  const engaged = new Map<string, Engaged>();
  /** What was last said of each `Cluster` key, so that a state is said once. */
  const said = new Map<string, string>();
  let stopped = false;

  const syncOnce = async () => {
    const listed: KubeObject[] = [];
    const unknown = new Set<string>();
    for (const namespace of settings.namespaces) {
      try {
        listed.push(...(await kube.list(capiClusterResource, { namespace })).items);
      } catch (err) {
        log.warn("could not list Cluster API Clusters; its clusters stay as they are", {
          namespace,
          error: String(err),
        });
        for (const e of engaged.values()) if (e.key.startsWith(`${namespace}/`)) unknown.add(e.key);
      }
    }
    const states = await Promise.all(listed.map((c) => readClusterState(kube, c)));
    const byKey = new Map(listed.map((c) => [`${c.metadata.namespace}/${c.metadata.name}`, c]));
    const candidates: Candidate[] = [];
    const refusals: { key: string; refusal: Refusal }[] = [];
    let waiting = 0;
    for (const s of states) {
      if (s.kind === "candidate") candidates.push(s.candidate);
      else if (s.kind === "refused") refusals.push(s);
      else if (s.kind === "unknown") {
        unknown.add(s.key);
        log.warn("could not read a Cluster's Secrets; it stays as it is", { key: s.key, error: s.error });
      } else {
        waiting++;
        if (said.get(s.key) !== `waiting:${s.why}`) {
          said.set(s.key, `waiting:${s.why}`);
          log.info("Cluster not reconciled yet", { key: s.key, why: s.why });
        }
      }
    }
    const plan = planDiscovery(candidates, unknown, engaged, declared);
    refusals.push(...plan.refuse);
    for (const name of plan.stop) {
      engaged.delete(name);
      await fleet.remove(name);
    }
    for (const c of plan.start) {
      try {
        await fleet.add({
          cluster: c.name,
          credentials: c.credentials,
          connect: () => connectKubeconfigText(c.kubeconfig, config, clusterLog(log, c.name)),
        });
        engaged.set(c.name, { key: c.key, hash: c.hash });
        said.set(c.key, "engaged");
        log.info("reconciling a cluster discovered from Cluster API", { key: c.key, cluster: c.name });
      } catch (err) {
        log.error("could not start a discovered cluster; tried again at the next sync", {
          key: c.key,
          error: String(err),
        });
      }
    }
    for (const { key, refusal } of refusals) {
      if (said.get(key) === `refused:${refusal.reason}:${refusal.note}`) continue;
      said.set(key, `refused:${refusal.reason}:${refusal.note}`);
      log.warn("Cluster refused", { key, reason: refusal.reason, note: refusal.note });
      const object = byKey.get(key);
      if (object)
        await events.record(object, {
          type: "Warning",
          reason: refusal.reason,
          action: "Discover",
          note: refusal.note,
        });
    }
    for (const key of said.keys()) if (!byKey.has(key)) said.delete(key);
    metrics.gauge("kubefn_cluster_api_clusters", engaged.size, { state: "reconciled" });
    metrics.gauge("kubefn_cluster_api_clusters", waiting, { state: "waiting" });
    metrics.gauge("kubefn_cluster_api_clusters", refusals.length, { state: "refused" });
  };

  // One sync at a time; a call while one runs makes one more run after it.
  let running: Promise<void> | undefined;
  let again = false;
  const sync = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await syncOnce().catch((err: unknown) =>
          log.error("Cluster API sync failed", { error: String(err) }),
        );
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
    });
    return running;
  };

  await sync();
  const timer = setInterval(() => void sync(), settings.resyncSeconds * 1000);
  const aborts = settings.namespaces.map((namespace) => {
    const abort = new AbortController();
    void watchClusters(connection, namespace, () => void sync(), abort.signal, log);
    return abort;
  });
  log.info("discovering clusters from Cluster API", { namespaces: settings.namespaces.join(",") });
  return {
    sync,
    async stop() {
      stopped = true;
      clearInterval(timer);
      for (const a of aborts) a.abort();
      await running;
    },
  };
}

/**
 * Watches one namespace's `Cluster` objects until `signal` aborts, calling `changed` on every
 * event and whenever a watch is (re-)established — after a gap, the sync reads everything again,
 * so no event lost in it matters. Failures are retried after 1–30 s.
 */
async function watchClusters(
  connection: ClusterConnection,
  namespace: string,
  changed: () => void,
  signal: AbortSignal,
  log: Log,
): Promise<void> {
  const path = `/apis/${capiClusterResource.group}/${capiClusterResource.version}/namespaces/${namespace}/${capiClusterResource.resource}`;
  let failures = 0;
  let first = true;
  while (!signal.aborted) {
    let onAbort: (() => void) | undefined;
    const ended = new Promise<void>((resolve, reject) => {
      new Watch(connection.kc)
        .watch(
          path,
          { allowWatchBookmarks: true, timeoutSeconds: 300 },
          (type: string) => {
            if (type !== "BOOKMARK") changed();
          },
          (err: unknown) => (err ? reject(err) : resolve()),
        )
        .then((controller) => {
          onAbort = () => controller.abort();
          if (signal.aborted) controller.abort();
          else signal.addEventListener("abort", onAbort, { once: true });
          failures = 0;
          if (!first) changed();
          first = false;
        }, reject);
    });
    try {
      await ended;
    } catch (err) {
      if (signal.aborted) return;
      failures++;
      if (failures === 1) log.warn("Cluster API watch failed; retrying", { namespace, error: String(err) });
      await sleep(Math.min(30, 2 ** (failures - 1)) * 1000, undefined, { signal }).catch(() => undefined);
      changed();
    } finally {
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
  }
}
