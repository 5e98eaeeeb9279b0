/**
 * What a test file leaves behind: the processes it started that still run, and the cluster objects
 * it created that are still there. test/setup/leak-check.ts takes a {@link Snapshot} before each
 * integration file and fails the file with {@link describeLeaks} when {@link findLeaks} finds
 * anything after it, then {@link releaseLeaks} ends what leaked so the next file starts clean.
 *
 * A file's processes are the vitest worker's descendants plus every process whose environment
 * carries the file's mark ({@link fileMarkEnv}, set in the worker before the file loads and
 * inherited by whatever it spawns): a grandchild whose parent died is reparented away from the
 * worker, but keeps its environment.
 *
 * A file's objects are the watched kinds' objects ({@link watchedKinds}: Namespaces, Proxies,
 * SubPools and Sites in every namespace, and the cluster-scoped kinds tests create) whose UID the
 * snapshot before the file did not hold — except kubefn's own install ({@link sharedInstall}),
 * which files apply idempotently and share.
 *
 * Caveats: an object or process that is on its way out (terminating, signalled) is given a
 * bounded wait; what is still there after it is a leak.
 */
import { readdirSync, readFileSync } from "node:fs";
import { manifestsIn } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import {
  isNotFound,
  type Kube,
  type KubeObject,
  listAll,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";

/** The environment variable that marks a test file's processes (inherited through spawn). */
export const fileMarkEnv = "KUBEFN_TEST_FILE_MARK";

/** One process, from /proc. */
export interface ProcessEntry {
  pid: number;
  ppid: number;
  /** /proc state letter: R, S, D, Z (zombie: exited, not yet reaped), … */
  state: string;
  /** Start time in clock ticks since boot: with `pid`, names the process across pid reuse. */
  startTime: string;
  command: string;
  /** The value of {@link fileMarkEnv} in its environment, if any (and readable). */
  mark?: string;
}

/** One object of a watched kind. */
export interface ObjectEntry {
  kind: string;
  namespace?: string;
  name: string;
  uid: string;
  terminating: boolean;
  finalizers: string[];
}

export interface Snapshot {
  processes: ProcessEntry[];
  objects: ObjectEntry[];
}

export interface Leaks {
  processes: ProcessEntry[];
  objects: ObjectEntry[];
}

const processKey = (p: ProcessEntry) => `${p.pid}@${p.startTime}`;

/** Every process on this machine that /proc shows (those that exit meanwhile are skipped). */
export function readProcesses(): ProcessEntry[] {
  const table: ProcessEntry[] = [];
  for (const dir of readdirSync("/proc")) {
    if (!/^\d+$/.test(dir)) continue;
    try {
      const stat = readFileSync(`/proc/${dir}/stat`, "utf8");
      // "pid (comm) state ppid … starttime(22nd field)"; comm may hold spaces and parentheses.
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      const cmdline = readFileSync(`/proc/${dir}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
      let mark: string | undefined;
      try {
        const env = readFileSync(`/proc/${dir}/environ`, "utf8").split("\0");
        mark = env.find((e) => e.startsWith(`${fileMarkEnv}=`))?.slice(fileMarkEnv.length + 1);
      } catch {
        // Another user's process: not ours.
      }
      table.push({
        pid: Number(dir),
        ppid: Number(fields[1]),
        state: fields[0] ?? "?",
        startTime: fields[19] ?? "",
        command: cmdline || `[${comm}]`,
        ...(mark ? { mark } : {}),
      });
    } catch {
      // Exited while we read it.
    }
  }
  return table;
}

/**
 * A test file's live processes in `table`: the descendants of `rootPid` (the vitest worker) and
 * every process carrying `mark`, less zombies (they have exited) and less the root itself.
 */
export function processesOf(table: ProcessEntry[], rootPid: number, mark: string): ProcessEntry[] {
  const children = new Map<number, ProcessEntry[]>();
  for (const p of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const found = new Map<number, ProcessEntry>();
  const walk = (pid: number) => {
    for (const c of children.get(pid) ?? []) {
      if (found.has(c.pid)) continue;
      found.set(c.pid, c);
      walk(c.pid);
    }
  };
  walk(rootPid);
  for (const p of table) if (p.mark === mark) found.set(p.pid, p);
  found.delete(rootPid);
  return [...found.values()].filter((p) => p.state !== "Z");
}

/**
 * Helper processes a library keeps for the worker's lifetime and that end with it (they read
 * their stdin from the worker): esbuild's service, which wrangler starts to bundle the Worker.
 */
export const isWorkerDaemon = (p: ProcessEntry): boolean =>
  /(^|\/)esbuild(\.exe)? --service=/.test(p.command);

/** The processes in `after` that `before` did not have, less the worker's own daemons. */
export function newProcesses(before: ProcessEntry[], after: ProcessEntry[]): ProcessEntry[] {
  const seen = new Set(before.map(processKey));
  return after.filter((p) => !seen.has(processKey(p)) && !isWorkerDaemon(p));
}

const clusterScoped = (group: string, version: string, resource: string, kind: string): Resource => ({
  group,
  version,
  resource,
  kind,
  namespaced: false,
});

/**
 * The kinds whose objects a file must not leave behind: Namespaces, kubefn's primaries in every
 * namespace, and the cluster-scoped kinds tests create (a kind the server does not serve counts
 * as empty).
 */
export const watchedKinds: Resource[] = [
  Resources.Namespace,
  proxyResource,
  subPoolResource,
  siteResource,
  Resources.CustomResourceDefinition,
  Resources.ClusterRole,
  Resources.ClusterRoleBinding,
  clusterScoped(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
  ),
  clusterScoped(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
  ),
  clusterScoped(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
  ),
  clusterScoped(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
  ),
  clusterScoped("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass"),
  clusterScoped("storage.k8s.io", "v1", "storageclasses", "StorageClass"),
  clusterScoped("", "v1", "persistentvolumes", "PersistentVolume"),
  clusterScoped("gateway.networking.k8s.io", "v1", "gatewayclasses", "GatewayClass"),
];

/** Every object of the {@link watchedKinds}, by metadata only. */
export async function clusterObjects(kube: Kube): Promise<ObjectEntry[]> {
  const lists = await Promise.all(
    watchedKinds.map(async (res) => {
      try {
        return { res, items: await listAll(kube, res, { metadataOnly: true }) };
      } catch (err) {
        if (isNotFound(err)) return { res, items: [] as KubeObject[] };
        throw err;
      }
    }),
  );
  return lists.flatMap(({ res, items }) =>
    items.map((o) => ({
      kind: res.kind,
      ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
      name: o.metadata.name ?? "",
      uid: o.metadata.uid ?? "",
      terminating: !!o.metadata.deletionTimestamp,
      finalizers: o.metadata.finalizers ?? [],
    })),
  );
}

const objectKey = (o: Pick<ObjectEntry, "kind" | "namespace" | "name">) =>
  `${o.kind}/${o.namespace ?? ""}/${o.name}`;

/**
 * kubefn's install (`kubectl apply -k infra/`: infra/crds, infra/rbac, the relay's manifests) as
 * {@link objectKey}s: files apply it idempotently, and share it.
 */
export async function sharedInstall(): Promise<Set<string>> {
  const manifests = [
    ...(await manifestsIn("crds")),
    ...(await manifestsIn("rbac")),
    ...(await manifestsIn("relay")),
  ];
  return new Set(
    manifests
      .filter((m) => m.metadata)
      .map((m) =>
        objectKey({
          kind: m.kind,
          name: m.metadata.name ?? "",
          ...(m.metadata.namespace ? { namespace: m.metadata.namespace } : {}),
        }),
      ),
  );
}

/** The objects in `after` whose UID `before` did not have, less the `shared` ones. */
export function newObjects(before: ObjectEntry[], after: ObjectEntry[], shared: Set<string>): ObjectEntry[] {
  const seen = new Set(before.map((o) => o.uid));
  return after.filter((o) => !seen.has(o.uid) && !shared.has(objectKey(o)));
}

/** One line per leak, for the failure message. */
export function describeLeaks(leaks: Leaks): string[] {
  return [
    ...leaks.processes.map((p) => `process ${p.pid} still running: ${p.command.slice(0, 200)}`),
    ...leaks.objects.map((o) => {
      const notes = [
        ...(o.terminating ? ["terminating"] : []),
        ...(o.finalizers.length > 0 ? [`finalizers ${o.finalizers.join(", ")}`] : []),
      ];
      const where = `${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name}`;
      return `${where} left in the cluster${notes.length > 0 ? ` (${notes.join(", ")})` : ""}`;
    }),
  ];
}

/** Whether an object is on its way out: terminating, or in a terminating Namespace (whose content the namespace controller deletes). */
export function goingAway(objects: ObjectEntry[]): (o: ObjectEntry) => boolean {
  const terminatingNamespaces = new Set(
    objects.filter((o) => o.kind === "Namespace" && o.terminating).map((o) => o.name),
  );
  return (o) => o.terminating || (o.namespace !== undefined && terminatingNamespaces.has(o.namespace));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * What the file leaked, after a bounded wait: processes get `processGraceMs` to exit; objects get
 * `objectGraceMs`, stretched to `terminatingGraceMs` while every one left is on its way out
 * ({@link goingAway}: a Namespace's content going, a finalizer being removed).
 */
export async function findLeaks(
  before: Snapshot,
  current: () => Promise<Snapshot>,
  shared: Set<string>,
  { processGraceMs = 5000, objectGraceMs = 5000, terminatingGraceMs = 60_000, pollMs = 500 } = {},
): Promise<Leaks> {
  const start = Date.now();
  for (;;) {
    const now = await current();
    const leaks: Leaks = {
      processes: newProcesses(before.processes, now.processes),
      objects: newObjects(before.objects, now.objects, shared),
    };
    const elapsed = Date.now() - start;
    const waitProcesses = leaks.processes.length > 0 && elapsed < processGraceMs;
    const going = goingAway(now.objects);
    const objectWindow = leaks.objects.every(going) ? terminatingGraceMs : objectGraceMs;
    const waitObjects = leaks.objects.length > 0 && elapsed < objectWindow;
    if (!waitProcesses && !waitObjects) return leaks;
    await sleep(pollMs);
  }
}

/**
 * Ends what leaked, so that the next file starts clean: SIGKILLs each process (if it is still the
 * same process), removes the finalizers of kubefn's primaries and deletes every object, then waits
 * (bounded) until they are gone. Best effort: the file has failed already.
 */
export async function releaseLeaks(kube: Kube, leaks: Leaks, timeoutMs = 60_000): Promise<void> {
  const stillSame = (p: ProcessEntry) => {
    try {
      return readFileSync(`/proc/${p.pid}/stat`, "utf8").includes(` ${p.startTime} `);
    } catch {
      return false;
    }
  };
  for (const p of leaks.processes) {
    if (!stillSame(p)) continue;
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
  const resourceOf = new Map(watchedKinds.map((r) => [r.kind, r]));
  for (const o of leaks.objects) {
    const res = resourceOf.get(o.kind);
    if (!res) continue;
    const key = { name: o.name, ...(o.namespace ? { namespace: o.namespace } : {}) };
    try {
      if (o.finalizers.length > 0 && o.kind !== "Namespace")
        await kube.patch(res, key, { type: "merge", body: { metadata: { finalizers: null } } });
      await kube.delete(res, key, { preconditions: { uid: o.uid } });
    } catch {
      // Gone meanwhile, or replaced (another UID): not ours to delete.
    }
  }
  const deadline = Date.now() + timeoutMs;
  const uids = new Set(leaks.objects.map((o) => o.uid));
  while (Date.now() < deadline) {
    const left = (await clusterObjects(kube).catch(() => [])).filter((o) => uids.has(o.uid));
    const running = leaks.processes.filter(stillSame);
    if (left.length === 0 && running.length === 0) return;
    // A pass still running when the finalizers were cleared may have added one back.
    for (const o of left) {
      const res = resourceOf.get(o.kind);
      if (!res || o.kind === "Namespace" || o.finalizers.length === 0) continue;
      const key = { name: o.name, ...(o.namespace ? { namespace: o.namespace } : {}) };
      await kube
        .patch(res, key, { type: "merge", body: { metadata: { finalizers: null } } })
        .catch(() => undefined);
    }
    await sleep(500);
  }
}
