/**
 * `npm run bench -- fleet`: kubefn beside a controller-runtime peer, in one run on one devcluster.
 *
 * The devcluster's audit webhook goes to a tee in this process that counts every request of the
 * two identities under measurement — reads too: the bench's audit policy is
 * infra/audit/policy.yaml plus one first rule logging get/list/watch of exactly those two
 * ServiceAccounts (watches at ResponseStarted, as they open) — and forwards the write events, as
 * the production policy would send them, to the Node host's intake.
 *
 * - kubefn: the Node host (`functions/node/main.ts`, default settings, 60 s sweep) as the
 *   least-privileged `kubefn-system/kubefn` ServiceAccount, over 1,000 primaries: 900 External
 *   Proxies with health checks through 4 local forward proxies, and 100 SubPools.
 *   `KUBEFN_BENCH_FLEET_LARGE=1`: 9,000 + 1,000.
 * - peer: test/bench/peer (Go, controller-runtime v0.25, built here with `go build`, cached), as
 *   its own ServiceAccount with the cluster-wide rights its informers need, over as many SubPools
 *   of its own CRD (same schema, group peer.bench.kubefn.dev) as kubefn has.
 *
 * Phases: kubefn's SubPools converge (created once a sweep's passes drained), then its Proxies,
 * then the peer's SubPools (each timed from the first create to the last primary converged,
 * requests counted from the first create until 5 s after, and printed per SubPool by verb and
 * resource, kubefn's beside the peer's, with the ones the API server refused by code); then a steady window (default 300 s,
 * one drift period of every controller) with both running and nothing changing: requests per hour by verb,
 * messages (passes) per object-hour, probes per minute (hits at the probe target), CPU seconds
 * per minute and RSS of each process. Ends with one JSON line `{"bench":"fleet",...}`.
 *
 * Caveats: converged means, for a SubPool, that its status reports its Namespace (the pass that
 * created every owned object wrote it); for a Proxy, phase Ready (provisioned and healthy). The
 * Proxies' window holds whatever sweeps ran meanwhile (their probes are what makes them Ready).
 * The peer does not compute proxy-gateway readiness, Gateway mode or legacy LimitRange clean-up
 * (see peer/main.go); its speed is bounded by client-go's default rate limit.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { devclusterBinary } from "../../functions/node/dev/devcluster.ts";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { createKube, isAlreadyExists, listAll, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig, type NodeTransportHttp } from "../../shared/kube/node.ts";
import type { Kube, KubeObject, Resource } from "../../shared/kube/port.ts";
import { type HostProcess, startHost } from "../e2e/host.ts";
import { tempDir } from "../support/temp-dir.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import { startFixtures } from "./sweep.ts";
import { type TransportFigures, transportProbe } from "./transport-probe.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
export const KUBEFN_USER = "system:serviceaccount:kubefn-system:kubefn";
export const PEER_NAMESPACE = "kubefn-bench-peer";
const PEER_USER = `system:serviceaccount:${PEER_NAMESPACE}:peer`;
export const PEER_GROUP = "peer.bench.kubefn.dev";
const READ_VERBS = new Set(["get", "list", "watch"]);

const peerSubPoolResource: Resource = { ...subPoolResource, group: PEER_GROUP };

export interface FleetOptions {
  proxies: number;
  subPools: number;
  /**
   * Tenant namespaces the Proxies are spread over (round-robin), each opted in with a RoleBinding
   * of kubefn-tenant: kubefn lists the pod provider's instances once per namespace instead of once
   * across the cluster. Default 1 (`bench-fleet`).
   */
  namespaces?: number;
  /** The steady window, seconds (≥ one drift period: the sweep runs every 60 s). */
  steadySeconds: number;
  /**
   * Create the Proxies in steps of this many, each step converged and then watched for a minute:
   * the ramp stops at the first step that lost the 30 s rhythm (fewer than 95 % of the due probes
   * a minute at the target, or probes shed as late), and the bench reports the largest fleet that
   * kept it. Without it, all Proxies are created at once.
   */
  rampStep?: number;
  /**
   * The whole run's time cap, seconds: no ramp step starts within 5 minutes of it, and a ramp cut
   * short by it (or by a lost rhythm) ends the bench there, without the peer and the steady window.
   */
  capSeconds?: number;
  /**
   * The host's transport to the API server (`KUBEFN_KUBE_HTTP`); set, the bench also measures it:
   * connections to the API server, request times, CPU per pass and per sweep.
   */
  transport?: NodeTransportHttp;
  /** Run the controller-runtime peer (default true); a transport comparison leaves it out. */
  peer?: boolean;
}

// The steady window is one drift period of every controller (Proxy and Site: 300 s).
export const defaultFleet: FleetOptions = { proxies: 900, subPools: 100, steadySeconds: 300 };
export const largeFleet: FleetOptions = {
  proxies: 9000,
  subPools: 1000,
  steadySeconds: 300,
  rampStep: 1000,
  capSeconds: 5400,
};

/**
 * The profile `npm run bench -- fleet` runs: the default or (`KUBEFN_BENCH_FLEET_LARGE=1`) the
 * large one, with `KUBEFN_BENCH_FLEET_PROXIES`, `KUBEFN_BENCH_FLEET_SUBPOOLS` and
 * `KUBEFN_BENCH_FLEET_STEADY` (seconds) overriding its sizes (a smaller run on a shared machine),
 * `KUBEFN_BENCH_FLEET_RAMP` (Proxies a step; 0: at once) and `KUBEFN_BENCH_FLEET_CAP` (seconds).
 */
export function fleetFromEnv(env: NodeJS.ProcessEnv = process.env): FleetOptions {
  const base = env.KUBEFN_BENCH_FLEET_LARGE === "1" ? largeFleet : defaultFleet;
  const num = (v: string | undefined, d: number) => (v === undefined || v === "" ? d : Number(v));
  return {
    proxies: num(env.KUBEFN_BENCH_FLEET_PROXIES, base.proxies),
    subPools: num(env.KUBEFN_BENCH_FLEET_SUBPOOLS, base.subPools),
    steadySeconds: num(env.KUBEFN_BENCH_FLEET_STEADY, base.steadySeconds),
    namespaces: num(env.KUBEFN_BENCH_FLEET_NAMESPACES, base.namespaces ?? 1),
    ...(num(env.KUBEFN_BENCH_FLEET_RAMP, base.rampStep ?? 0) > 0
      ? { rampStep: num(env.KUBEFN_BENCH_FLEET_RAMP, base.rampStep ?? 0) }
      : {}),
    ...(num(env.KUBEFN_BENCH_FLEET_CAP, base.capSeconds ?? 0) > 0
      ? { capSeconds: num(env.KUBEFN_BENCH_FLEET_CAP, base.capSeconds ?? 0) }
      : {}),
  };
}

/** One audited request of a measured identity. */
interface Counted {
  at: number;
  user: string;
  verb: string;
  resource: string;
  code: number;
}

interface AuditEvent {
  stage?: string;
  verb?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp?: string;
}

/**
 * The API server's audit webhook: counts the measured identities' requests and forwards what
 * the production policy would send (writes, at ResponseComplete) to the intake once it is set.
 */
export class AuditTee {
  readonly counted: Counted[] = [];
  /** Writes forwarded to the intake (what may cause passes): time and `user verb resource`. */
  readonly forwarded: { at: number; what: string }[] = [];
  intake: { url: string; token: string } | undefined;
  forwardErrors = 0;
  private server: Server | undefined;
  readonly token = randomBytes(24).toString("hex");

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      if (req.method !== "POST" || req.headers.authorization !== `Bearer ${this.token}`) {
        res.writeHead(401).end();
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        res.writeHead(200).end();
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { items?: AuditEvent[] };
          this.take(body.items ?? []);
        } catch {
          // A batch we cannot read is the API server's problem, not the bench's figure.
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/audit`;
  }

  private take(items: AuditEvent[]): void {
    const forward: AuditEvent[] = [];
    for (const e of items) {
      const user = e.user?.username ?? "";
      const verb = e.verb ?? "";
      const read = READ_VERBS.has(verb);
      if (user === KUBEFN_USER || user === PEER_USER) {
        const opened = verb === "watch" ? e.stage === "ResponseStarted" : e.stage === "ResponseComplete";
        if (opened) {
          this.counted.push({
            at: Date.parse(e.requestReceivedTimestamp ?? "") || Date.now(),
            user,
            verb,
            resource: e.objectRef?.resource
              ? `${e.objectRef.resource}${e.objectRef.subresource ? `/${e.objectRef.subresource}` : ""}`
              : "",
            code: e.responseStatus?.code ?? 0,
          });
        }
      }
      if (!read && e.stage === "ResponseComplete") {
        forward.push(e);
        const resource = e.objectRef?.resource
          ? `${e.objectRef.resource}${e.objectRef.subresource ? `/${e.objectRef.subresource}` : ""}`
          : "";
        this.forwarded.push({
          at: Date.parse(e.requestReceivedTimestamp ?? "") || Date.now(),
          what: `${user} ${verb} ${resource}`,
        });
      }
    }
    const intake = this.intake;
    if (!intake || forward.length === 0) return;
    void fetch(intake.url, {
      method: "POST",
      headers: { authorization: `Bearer ${intake.token}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: forward }),
    })
      .then((r) => {
        if (!r.ok) this.forwardErrors++;
        return r.body?.cancel();
      })
      .catch(() => {
        this.forwardErrors++;
      });
  }

  /** Requests of `user` received in [from, to). */
  between(user: string, from: number, to: number): Counted[] {
    return this.counted.filter((c) => c.user === user && c.at >= from && c.at < to);
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** infra/audit/policy.yaml, plus a first rule logging the measured identities' reads. */
export function benchAuditPolicy(dir: string): string {
  const policy = parseYaml(readFileSync(join(root, "infra/audit/policy.yaml"), "utf8")) as {
    omitStages?: string[];
    rules: unknown[];
  };
  // Watches are long-running: counted when they open (ResponseStarted).
  policy.omitStages = ["RequestReceived"];
  policy.rules.unshift({
    level: "Metadata",
    users: [KUBEFN_USER, PEER_USER],
    verbs: ["get", "list", "watch"],
  });
  const file = join(dir, "audit-policy.yaml");
  writeFileSync(file, stringifyYaml(policy));
  return file;
}

export interface RunningCluster {
  kubeconfig: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

export async function startAuditedDevcluster(
  webhook: string,
  token: string,
  policy: string,
): Promise<RunningCluster> {
  const child = spawn(
    devclusterBinary,
    [
      "--exit-with-parent",
      "--audit-webhook-url",
      webhook,
      "--audit-webhook-token",
      token,
      "--audit-policy",
      policy,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let tail = "";
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    tail = (tail + c).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const info = await new Promise<{ kubeconfig: string }>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`devcluster not ready in 180 s:\n${tail}`)), 180_000);
    child.stdout!.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      const line = out.split("\n").find((l) => l.startsWith("devcluster ready "));
      if (!line || !out.includes("\n", out.indexOf("devcluster ready "))) return;
      clearTimeout(timer);
      resolve(JSON.parse(line.slice("devcluster ready ".length)) as { kubeconfig: string });
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`devcluster exited before it was ready:\n${tail}`));
    });
  });
  return {
    kubeconfig: info.kubeconfig,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** `go build` of the peer into a cache directory; Go's build cache makes a rebuild take seconds. */
export function buildPeer(): string {
  const out = join(root, "node_modules", ".cache", "kubefn-bench", "peer");
  mkdirSync(join(out, ".."), { recursive: true });
  const env = { ...process.env, PATH: `${process.env.PATH ?? ""}:/usr/local/go/bin` };
  execFileSync("go", ["build", "-o", out, "."], {
    cwd: join(root, "test/bench/peer"),
    env,
    stdio: "inherit",
  });
  return out;
}

/** The peer's CRD (kubefn's SubPool schema under the peer's group), SA and the rights it needs. */
export async function installPeer(admin: Kube): Promise<void> {
  const crd = parseYaml(
    readFileSync(join(root, "infra/crds/subpools.subrelay.example.com.yaml"), "utf8"),
  ) as KubeObject & {
    spec: { group: string };
  };
  crd.metadata = { name: `subpools.${PEER_GROUP}` };
  crd.spec.group = PEER_GROUP;
  const rule = (apiGroups: string[], resources: string[], verbs: string[]) => ({
    apiGroups,
    resources,
    verbs,
  });
  const all = ["get", "list", "watch", "create", "update", "patch", "delete"];
  const objects: [Resource, KubeObject][] = [
    [Resources.CustomResourceDefinition, crd],
    [Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: PEER_NAMESPACE } }],
    [
      Resources.ServiceAccount,
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "peer", namespace: PEER_NAMESPACE } },
    ],
    [
      Resources.ClusterRole,
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "kubefn-bench-peer" },
        rules: [
          rule([PEER_GROUP], ["subpools"], ["get", "list", "watch", "update", "patch"]),
          rule([PEER_GROUP], ["subpools/status", "subpools/finalizers"], ["get", "update", "patch"]),
          rule(
            [""],
            ["namespaces", "secrets", "serviceaccounts", "configmaps", "resourcequotas", "services"],
            all,
          ),
          rule(["apps"], ["statefulsets"], all),
          rule(["networking.k8s.io"], ["networkpolicies"], all),
          rule(["policy"], ["poddisruptionbudgets"], all),
          rule(["coordination.k8s.io"], ["leases"], all),
          rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
        ],
      },
    ],
    [
      Resources.ClusterRoleBinding,
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "kubefn-bench-peer" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "kubefn-bench-peer" },
        subjects: [{ kind: "ServiceAccount", name: "peer", namespace: PEER_NAMESPACE }],
      },
    ],
  ];
  for (const [res, obj] of objects) {
    try {
      await admin.create(res, obj);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
  await waitFor("the peer CRD to be served", 60_000, async () => {
    try {
      await admin.list(peerSubPoolResource, { limit: 1 });
      return true;
    } catch {
      return undefined;
    }
  });
}

/** A kubeconfig file for `token` on the cluster of `adminKubeconfig`, written into `dir` (mode 0600). */
export function saKubeconfig(adminKubeconfig: string, token: string, dir: string, name: string): string {
  const kc = asServiceAccount(loadKubeConfig({ file: adminKubeconfig }), token);
  const file = join(dir, `${name}.kubeconfig`);
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

interface Usage {
  cpuSeconds: number;
  /** The part of `cpuSeconds` spent in the kernel (system time: connects, writes, closes). */
  systemSeconds: number;
  rssMiB: number;
}

/**
 * CPU time (user + system) and resident memory of one process, from /proc; NaN for a process
 * that is gone (the peer exits when it loses its leader election on an overloaded machine: its
 * figures are then NaN, the host's still count).
 */
function usageOf(pid: number): Usage {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return { cpuSeconds: Number.NaN, systemSeconds: Number.NaN, rssMiB: Number.NaN };
  }
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rssPages = Number(fields[21]);
  return {
    cpuSeconds: ticks / 100,
    systemSeconds: Number(fields[12]) / 100,
    rssMiB: (rssPages * 4096) / 2 ** 20,
  };
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  fn: () => Promise<T | undefined>,
  pollMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(pollMs);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function subPool(group: string, name: string): KubeObject {
  return {
    apiVersion: `${group}/${subPoolResource.version}`,
    kind: "SubPool",
    metadata: { name },
    spec: {
      exposure: { mode: "Internal" },
      storage: { size: "1Gi" },
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "100m", memory: "64Mi" } } },
      cpaManager: {
        image: "ghcr.io/subrelay/cpa-manager:1.4.0",
        resources: { requests: { cpu: "50m", memory: "32Mi" } },
      },
    },
  };
}

/** Creates `objects`, 32 at a time, retrying a CRD that is not served yet. */
async function createAll(admin: Kube, res: Resource, objects: KubeObject[]): Promise<void> {
  await mapWithConcurrency(objects, 32, async (o) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await admin.create(res, o);
      } catch (err) {
        if (isAlreadyExists(err)) return o;
        if (attempt > 20) throw err;
        await sleep(250);
      }
    }
  });
}

/** Sum of every series of a Prometheus counter in the host's /metrics. */
async function counterSum(host: HostProcess, name: string): Promise<number> {
  const text = await (await fetch(`${host.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      sum += Number(line.split(" ").at(-1)) || 0;
  }
  return sum;
}

/** A Prometheus counter of the host's /metrics, summed by the values of `labels` (joined by ":"). */
async function counterBy(host: HostProcess, name: string, labels: string[]): Promise<Record<string, number>> {
  const text = await (await fetch(`${host.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const key = labels
      .map((label) => new RegExp(`${label}="([^"]*)"`).exec(line)?.[1] ?? "")
      .filter((v) => v !== "")
      .join(":");
    out[key] = (out[key] ?? 0) + (Number(line.split(" ").at(-1)) || 0);
  }
  return out;
}

/** The host's work queue, as its /metrics shows it: what a slow convergence is waiting on. */
async function hostQueue(host: HostProcess): Promise<string> {
  const [ready, running, delayed, shards] = await Promise.all(
    ["kubefn_queue_ready", "kubefn_queue_running", "kubefn_queue_delayed", "kubefn_probe_shards_total"].map(
      (m) => counterSum(host, m),
    ),
  );
  return `; host queue ${ready} ready, ${running} running, ${delayed} delayed; ${shards} probe shards so far`;
}

/** Resolves once the host's next sweep has run and every pass it caused is done. */
async function afterSweep(host: HostProcess): Promise<void> {
  const seen = host.lines.length;
  await host.waitFor((l) => l.msg === "sweep" && host.lines.indexOf(l) >= seen, 120_000);
  await waitFor("the host's queue to drain", 300_000, async () =>
    (await counterSum(host, "kubefn_queue_ready")) + (await counterSum(host, "kubefn_queue_running")) === 0
      ? true
      : undefined,
  );
}

function byVerb(calls: Counted[]): Record<string, number> {
  return countBy(calls.map((c) => c.verb));
}

function countBy(keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}

interface Converge {
  seconds: number;
  requests: number;
  perObject: number;
  byVerb: Record<string, number>;
  /** Requests by verb and resource, per object. */
  byVerbResourcePerObject: Record<string, number>;
  notFound: number;
  /** The 404s by resource: reads (or writes) of what was not there. */
  notFoundByResource: Record<string, number>;
  /**
   * The requests the API server answered with an error, by verb, resource and code, per object
   * (e.g. `create secrets 403`: refused by RBAC, `create configmaps 409`: it existed already).
   */
  failedPerObject: Record<string, number>;
}

/**
 * One line per `verb resource` either side sent while converging: requests per object, kubefn's
 * beside the peer's, most first (pure). A failed share (e.g. creates refused) follows kubefn's
 * figure.
 *
 * @example
 * convergeBreakdown(kubefn, peer) // → [{ what: "create secrets", kubefn: 1.38, peer: 1, failed: "0.38 403" }, …]
 */
export function convergeBreakdown(
  kubefn: Pick<Converge, "byVerbResourcePerObject" | "failedPerObject">,
  peer: Pick<Converge, "byVerbResourcePerObject">,
): { what: string; kubefn: number; peer: number; failed: string }[] {
  const keys = [
    ...new Set([
      ...Object.keys(kubefn.byVerbResourcePerObject),
      ...Object.keys(peer.byVerbResourcePerObject),
    ]),
  ];
  return keys
    .map((what) => ({
      what,
      kubefn: kubefn.byVerbResourcePerObject[what] ?? 0,
      peer: peer.byVerbResourcePerObject[what] ?? 0,
      failed: Object.entries(kubefn.failedPerObject)
        .filter(([k]) => k.slice(0, k.lastIndexOf(" ")) === what)
        .map(([k, n]) => `${n} ${k.slice(k.lastIndexOf(" ") + 1)}`)
        .join(", "),
    }))
    .sort((a, b) => b.kubefn + b.peer - (a.kubefn + a.peer) || a.what.localeCompare(b.what));
}

/** Creates `objects` and waits until `converged` says all are; counts `user`'s requests. */
async function converge(
  tee: AuditTee,
  user: string,
  admin: Kube,
  res: Resource,
  objects: KubeObject[],
  converged: () => Promise<number>,
  timeoutMs: number,
  /** What the controller is doing, for the progress lines and a timeout's message. */
  detail: () => Promise<string> = async () => "",
): Promise<Converge> {
  const t0 = Date.now();
  await createAll(admin, res, objects);
  process.stderr.write(
    `fleet: ${objects.length} ${res.resource} created in ${round((Date.now() - t0) / 1000, 1)} s\n`,
  );
  // Each poll lists every object (9,000 Proxies are megabytes of JSON): a large fleet is polled
  // less often, so that the bench's own reads do not slow what it measures.
  const pollMs = Math.min(5000, Math.max(500, objects.length / 2));
  let reported = t0;
  let progress = "";
  await waitFor(
    `${objects.length} ${res.resource} converged`,
    timeoutMs,
    async () => {
      // A list that times out on a loaded machine is polled again, not the bench's failure.
      let n: number;
      try {
        n = await converged();
      } catch (err) {
        process.stderr.write(`fleet: poll failed, polling again: ${String(err).slice(0, 200)}\n`);
        return undefined;
      }
      progress = `${n}/${objects.length} ${res.resource} converged after ${round((Date.now() - t0) / 1000, 0)} s`;
      if (Date.now() - reported >= 30_000) {
        reported = Date.now();
        process.stderr.write(`fleet: ${progress}${await detail().catch(() => "")}\n`);
      }
      return n >= objects.length ? true : undefined;
    },
    pollMs,
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}: ${progress}${await detail().catch(() => "")}`);
  });
  const t1 = Date.now();
  await sleep(5000 + 1500);
  const calls = tee.between(user, t0 - 1000, t1 + 5000);
  return {
    seconds: round((t1 - t0) / 1000, 1),
    requests: calls.length,
    perObject: round(calls.length / objects.length, 1),
    byVerb: byVerb(calls),
    byVerbResourcePerObject: Object.fromEntries(
      Object.entries(countBy(calls.map((c) => `${c.verb} ${c.resource}`))).map(([k, n]) => [
        k,
        round(n / objects.length, 2),
      ]),
    ),
    notFound: calls.filter((c) => c.code === 404).length,
    notFoundByResource: countBy(calls.filter((c) => c.code === 404).map((c) => `${c.verb} ${c.resource}`)),
    failedPerObject: Object.fromEntries(
      Object.entries(
        countBy(calls.filter((c) => c.code >= 400).map((c) => `${c.verb} ${c.resource} ${c.code}`)),
      ).map(([k, n]) => [k, round(n / objects.length, 2)]),
    ),
  };
}

/** The SubPool passes between two reads of `kubefn_pass_triggers_total`, by trigger, per pool (pure). */
export function perPoolTriggers(
  before: Record<string, number>,
  after: Record<string, number>,
  pools: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of Object.entries(after)) {
    if (!key.startsWith("subpool:")) continue;
    const d = n - (before[key] ?? 0);
    if (d > 0) out[key.slice("subpool:".length)] = round(d / pools, 2);
  }
  return out;
}

async function countPools(admin: Kube, res: Resource, prefix: string): Promise<number> {
  const pools = await listAll<KubeObject & { status?: { namespace?: string } }>(admin, res, {});
  return pools.filter((p) => p.metadata.name?.startsWith(prefix) && p.status?.namespace).length;
}

/** One step of the ramp: the fleet's size then, and whether its probes kept the 30 s rhythm. */
interface RampStep {
  proxies: number;
  convergeSeconds: number | null;
  probesPerMinute: number;
  due: number;
  shed: number;
  kept: boolean;
}

function rampRow(ramp: RampStep[], largest: number, why: string): BenchRow {
  return {
    name: "fleet largest keeping 30 s",
    figure: largest,
    unit: "External Proxies",
    note: `${why}; steps ${ramp.map((r) => `${r.proxies}: ${r.probesPerMinute}/${r.due} probes/min${r.shed ? `, ${r.shed} shed` : ""}`).join("; ")}`,
  };
}

/** A ramp cut short (cap or lost rhythm): the ramp's figure alone, without peer and steady window. */
function rampOnly(
  ramp: RampStep[],
  largest: number,
  why: string,
  commit: string,
  opts: FleetOptions,
): FleetResult {
  return {
    rows: [rampRow(ramp, largest, `ramp stopped: ${why}; no peer or steady window`)],
    json: { bench: "fleet", commit, options: opts, ramp, largestFleetKeepingRhythm: largest, stopped: why },
  };
}

export interface FleetResult {
  rows: BenchRow[];
  json: Record<string, unknown>;
  /** With `transport`: what the host's transport cost. */
  transport?: TransportFigures;
}

export async function benchFleet(opts: FleetOptions = defaultFleet): Promise<FleetResult> {
  // The commit measured: the one checked out when the run started.
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], {
    cwd: root,
    encoding: "utf8",
  }).trim();
  const deadline = Date.now() + (opts.capSeconds ?? 24 * 3600) * 1000;
  const remainingMs = () => Math.max(0, deadline - Date.now());
  // Holds the two ServiceAccounts' kubeconfigs (tokens): removed on every exit path.
  const temp = tempDir("kubefn-bench-fleet-");
  const dir = temp.path;
  const cleanups: (() => Promise<unknown>)[] = [async () => temp.remove()];
  // The host and the peer, killed if the bench exits without its cleanups (SIGINT/SIGTERM: run.ts
  // exits at once); the devcluster exits with its parent by itself.
  const children: ChildProcess[] = [];
  const killChildren = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  };
  process.once("exit", killChildren);
  try {
    const peerBinary = opts.peer !== false ? buildPeer() : "";
    const tee = new AuditTee();
    const webhook = await tee.start();
    cleanups.unshift(() => tee.stop());
    const cluster = await startAuditedDevcluster(webhook, tee.token, benchAuditPolicy(dir));
    cleanups.unshift(() => cluster.stop());
    const adminTransport = createNodeTransport(loadKubeConfig({ file: cluster.kubeconfig }));
    const admin = createKube(adminTransport, { fieldManager: "kubefn-bench" });
    await installCrdsAndRbac(admin);
    await installPeer(admin);
    const kubefnKubeconfig = saKubeconfig(
      cluster.kubeconfig,
      await serviceAccountToken(adminTransport, "kubefn-system", "kubefn"),
      dir,
      "kubefn",
    );
    const peerKubeconfig = saKubeconfig(
      cluster.kubeconfig,
      await serviceAccountToken(adminTransport, PEER_NAMESPACE, "peer"),
      dir,
      "peer",
    );

    const intakeToken = randomBytes(24).toString("hex");
    const timingFile = join(dir, "kube-timing.txt");
    const nodeOptions = [
      // `KUBEFN_BENCH_FLEET_PROFILE=<dir>`: the host writes a V8 CPU profile there when it stops.
      ...(process.env.KUBEFN_BENCH_FLEET_PROFILE
        ? [`--cpu-prof --cpu-prof-dir=${process.env.KUBEFN_BENCH_FLEET_PROFILE}`]
        : []),
      ...(opts.transport ? [`--import ${join(root, "test/bench/kube-timing.mjs")}`] : []),
    ];
    const host = await startHost({
      KUBECONFIG: kubefnKubeconfig,
      KUBEFN_AUDIT_TOKEN: intakeToken,
      ...(opts.transport ? { KUBEFN_KUBE_HTTP: opts.transport, KUBEFN_BENCH_TIMING_FILE: timingFile } : {}),
      ...(nodeOptions.length > 0 ? { NODE_OPTIONS: nodeOptions.join(" ") } : {}),
    });
    children.push(host.child);
    cleanups.unshift(() => host.stop());
    const probe = opts.transport
      ? transportProbe(
          host.child.pid!,
          new URL(loadKubeConfig({ file: cluster.kubeconfig }).getCurrentCluster()!.server),
          timingFile,
        )
      : undefined;
    if (probe) cleanups.unshift(async () => probe.stop());
    tee.intake = { url: `${host.url}/v1/events`, token: intakeToken };

    // kubefn's SubPools, created just after a sweep's passes drained, so that the window holds
    // the passes the creates caused and no drift pass of the next sweep.
    await afterSweep(host);
    const convergeFrom = {
      at: Date.now(),
      cpu: usageOf(host.child.pid!).cpuSeconds,
      passes: await counterSum(host, "kubefn_passes_total"),
      triggers: await counterBy(host, "kubefn_pass_triggers_total", ["controller", "trigger", "reason"]),
    };
    process.stderr.write(`fleet: ${opts.subPools} kubefn SubPools …\n`);
    const kfPools = Array.from({ length: opts.subPools }, (_, i) =>
      subPool(subPoolResource.group, `kf-${i}`),
    );
    const kfPoolConverge = await converge(
      tee,
      KUBEFN_USER,
      admin,
      subPoolResource,
      kfPools,
      () => countPools(admin, subPoolResource, "kf-"),
      Math.max(600_000, opts.subPools * 900),
      () => hostQueue(host),
    );
    // Why each SubPool pass in the window ran (`subpool:audit`, `subpool:audit:owned-status`,
    // `subpool:follow-up:waiting`, …), per pool: the passes behind the requests counted.
    const kfPoolPasses = perPoolTriggers(
      convergeFrom.triggers,
      await counterBy(host, "kubefn_pass_triggers_total", ["controller", "trigger", "reason"]),
      opts.subPools,
    );

    // kubefn's Proxies, health-checked through local forward proxies.
    process.stderr.write(`fleet: ${opts.proxies} External Proxies …\n`);
    // In a process of their own (test/bench/fixtures-server.ts): this one counts the audit
    // events, and thousands of probes a minute served here would queue behind them.
    const fixtures = await startFixtures(4);
    cleanups.push(() => fixtures.stop());
    const { target: targetPort, proxies: proxyPorts } = fixtures.ports;
    const namespaces = Array.from({ length: Math.max(1, opts.namespaces ?? 1) }, (_, i) =>
      i === 0 ? "bench-fleet" : `bench-fleet-${i}`,
    );
    for (const name of namespaces) {
      await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
      // Opted in, as a tenant namespace's admin does (infra/rbac/kubefn.yaml, kubefn-tenant).
      await admin.create(Resources.RoleBinding, {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "kubefn-tenant", namespace: name },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "kubefn-tenant" },
        subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
      });
    }
    const proxies: KubeObject[] = Array.from({ length: opts.proxies }, (_, i) => ({
      apiVersion: `${proxyResource.group}/${proxyResource.version}`,
      kind: "Proxy",
      metadata: { namespace: namespaces[i % namespaces.length]!, name: `ext-${i}` },
      spec: {
        mode: "External",
        endpoint: {
          host: "127.0.0.1",
          port: proxyPorts[i % proxyPorts.length]!,
          scheme: "http",
        },
        healthCheck: { probeURL: `http://127.0.0.1:${targetPort}/`, successThreshold: 1 },
      },
    }));
    const readyProxies = async () => {
      const listed = await listAll<KubeObject & { status?: { phase?: string } }>(admin, proxyResource, {});
      return listed.filter((p) => p.status?.phase === "Ready").length;
    };
    let proxyConverge: Converge;
    let fleetProxies = opts.proxies;
    const ramp: RampStep[] = [];
    if (!opts.rampStep) {
      proxyConverge = await converge(
        tee,
        KUBEFN_USER,
        admin,
        proxyResource,
        proxies,
        readyProxies,
        Math.min(Math.max(900_000, opts.proxies * 250), remainingMs()),
        () => hostQueue(host),
      );
    } else {
      let created = 0;
      let stopped: string | undefined;
      let last: Converge | undefined;
      while (created < proxies.length) {
        if (remainingMs() < 300_000) {
          stopped = `the ${opts.capSeconds} s cap`;
          break;
        }
        const step = proxies.slice(created, created + opts.rampStep);
        const base = created;
        try {
          last = await converge(
            tee,
            KUBEFN_USER,
            admin,
            proxyResource,
            step,
            async () => Math.max(0, (await readyProxies()) - base),
            Math.min(Math.max(600_000, step.length * 250), remainingMs() - 120_000),
            () => hostQueue(host),
          );
        } catch (err) {
          created += step.length;
          ramp.push({
            proxies: created,
            convergeSeconds: null,
            probesPerMinute: 0,
            due: created * 2,
            shed: 0,
            kept: false,
          });
          stopped = `step to ${created} did not converge: ${String(err).slice(0, 160)}`;
          break;
        }
        created += step.length;
        // A minute of probes at the target against the due two a minute each; shed = late shards.
        const h0 = await fixtures.hits();
        const shed0 = await counterSum(host, "kubefn_probes_shed_total");
        const t0 = Date.now();
        await sleep(60_000);
        const probesPerMinute = round((((await fixtures.hits()) - h0) / (Date.now() - t0)) * 60_000, 0);
        const shed = (await counterSum(host, "kubefn_probes_shed_total")) - shed0;
        const kept = probesPerMinute >= created * 2 * 0.95 && shed === 0;
        ramp.push({
          proxies: created,
          convergeSeconds: last.seconds,
          probesPerMinute,
          due: created * 2,
          shed,
          kept,
        });
        process.stderr.write(
          `fleet: ramp ${created} Proxies: ${probesPerMinute} probes/min (due ${created * 2}), ${shed} shed → ${kept ? "kept" : "lost"} the 30 s rhythm\n`,
        );
        if (!kept) {
          stopped = `the rhythm was lost at ${created} Proxies`;
          break;
        }
      }
      fleetProxies = created;
      const largest = ramp.filter((r) => r.kept).at(-1)?.proxies ?? 0;
      if (stopped || !last) return rampOnly(ramp, largest, stopped ?? "no step converged", commit, opts);
      proxyConverge = last;
    }

    const convergeTo = {
      at: Date.now(),
      cpu: usageOf(host.child.pid!).cpuSeconds,
      passes: await counterSum(host, "kubefn_passes_total"),
    };

    // The peer and its SubPools.
    const withPeer = opts.peer !== false;
    if (withPeer) process.stderr.write(`fleet: controller-runtime peer, ${opts.subPools} SubPools …\n`);
    // Without the peer, an idle stand-in keeps the window's code one shape (its figures are not shown).
    const peer = spawn(withPeer ? peerBinary : "sleep", withPeer ? [] : ["infinity"], {
      env: { ...process.env, KUBECONFIG: peerKubeconfig, PEER_LEASE_NAMESPACE: PEER_NAMESPACE },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(peer);
    const peerExited = new Promise<void>((resolve) => peer.once("exit", () => resolve()));
    cleanups.unshift(async () => {
      if (peer.exitCode === null && peer.signalCode === null) peer.kill("SIGTERM");
      await peerExited;
    });
    let peerErr = "";
    peer.stderr!.setEncoding("utf8").on("data", (c: string) => {
      peerErr = (peerErr + c).slice(-20_000);
    });
    void peerExited.then(() => process.stderr.write(`fleet: the peer exited:\n${peerErr.slice(-2000)}\n`));
    let peerPoolConverge: Converge = {
      seconds: Number.NaN,
      requests: 0,
      perObject: Number.NaN,
      byVerb: {},
      byVerbResourcePerObject: {},
      notFound: 0,
      notFoundByResource: {},
      failedPerObject: {},
    };
    if (withPeer) {
      // Elected, its informers synced and its workers started: from here on it only reacts.
      await waitFor("the peer's workers", 120_000, async () =>
        peerErr.includes("Starting workers") ? true : undefined,
      );
      await sleep(2000);
      const crPools = Array.from({ length: opts.subPools }, (_, i) => subPool(PEER_GROUP, `cr-${i}`));
      peerPoolConverge = await converge(
        tee,
        PEER_USER,
        admin,
        peerSubPoolResource,
        crPools,
        () => countPools(admin, peerSubPoolResource, "cr-"),
        Math.max(600_000, opts.subPools * 900),
      );
    }

    // Health settles: the first verdicts were measured while the fleet converged (a busy host),
    // and the latency reports that correct them come once the 60 s report interval has passed.
    // The steady window starts after a whole minute without a Proxy status write (bounded: a
    // fleet that never settles is measured as it is, and `healthSettle.settled` says so).
    process.stderr.write("fleet: waiting for a minute without a health write …\n");
    const settleFrom = Date.now();
    const healthWrites = (from: number, to: number) =>
      tee.between(KUBEFN_USER, from, to).filter((c) => c.verb === "patch" && c.resource === "proxies/status");
    // A transport comparison waits at most 2 minutes (its runs are back to back; each says so).
    const settleMs = opts.transport ? 120_000 : 300_000;
    const settled = await waitFor("a minute without a health write", settleMs, async () => {
      const now = Date.now();
      return now - settleFrom >= 60_000 && healthWrites(now - 60_000, now).length === 0 ? true : undefined;
    }).catch(() => false);
    const healthSettle = {
      settled,
      seconds: round((Date.now() - settleFrom) / 1000, 0),
      statusPatches: healthWrites(settleFrom, Date.now()).length,
      conflicts: healthWrites(settleFrom, Date.now()).filter((c) => c.code === 409).length,
    };

    // The steady window: both running, nothing changing.
    process.stderr.write(`fleet: steady window ${opts.steadySeconds} s …\n`);
    const probesAtProxies = () => fixtures.hits();
    const sweepLinesFrom = host.lines.length;
    const s0 = {
      at: Date.now(),
      passes: await counterSum(host, "kubefn_passes_total"),
      triggers: await counterBy(host, "kubefn_pass_triggers_total", ["trigger", "reason"]),
      probes: await probesAtProxies(),
      host: usageOf(host.child.pid!),
      peer: usageOf(peer.pid!),
    };
    // The machine's load beside the CPU figures: CPU per probe grows with it (docs/performance.md).
    const loadAverage = { start: loadavg().map((l) => round(l, 2)), end: [] as number[] };
    const rss = { host: [] as number[], peer: [] as number[] };
    while (Date.now() - s0.at < opts.steadySeconds * 1000) {
      await sleep(5000);
      rss.host.push(usageOf(host.child.pid!).rssMiB);
      rss.peer.push(usageOf(peer.pid!).rssMiB);
    }
    const s1 = {
      at: Date.now(),
      passes: await counterSum(host, "kubefn_passes_total"),
      triggers: await counterBy(host, "kubefn_pass_triggers_total", ["trigger", "reason"]),
      probes: await probesAtProxies(),
      host: usageOf(host.child.pid!),
      peer: usageOf(peer.pid!),
    };
    loadAverage.end = loadavg().map((l) => round(l, 2));
    const sweepsInWindow = host.lines
      .slice(sweepLinesFrom)
      .filter((l) => l.msg === "sweep" && Date.parse(l.time) >= s0.at && Date.parse(l.time) < s1.at).length;
    await sleep(2500);
    const transportFigures: TransportFigures | undefined = probe
      ? probe.figures(opts.transport!, {
          converge: {
            from: convergeFrom.at,
            to: convergeTo.at,
            cpuSeconds: convergeTo.cpu - convergeFrom.cpu,
            passes: convergeTo.passes - convergeFrom.passes,
          },
          steady: {
            from: s0.at,
            to: s1.at,
            cpuSeconds: s1.host.cpuSeconds - s0.host.cpuSeconds,
            passes: s1.passes - s0.passes,
            sweeps: sweepsInWindow,
          },
        })
      : undefined;
    const minutes = (s1.at - s0.at) / 60_000;
    const perHour = (n: number) => round((n / minutes) * 60, 0);
    const steady = (user: string) => {
      const calls = tee.between(user, s0.at, s1.at);
      const verbs = byVerb(calls);
      const byResource = countBy(calls.map((c) => `${c.verb} ${c.resource}`));
      return {
        requestsPerHour: perHour(calls.length),
        conflictsPerHour: perHour(calls.filter((c) => c.code === 409).length),
        byVerbPerHour: Object.fromEntries(Object.entries(verbs).map(([v, n]) => [v, perHour(n)])),
        byVerbResourcePerHour: Object.fromEntries(
          Object.entries(byResource).map(([v, n]) => [v, perHour(n)]),
        ),
      };
    };
    const kfSteady = steady(KUBEFN_USER);
    // What the intake heard at steady state, by writer (kubefn's own writes are dropped there).
    const intakeWritesPerHour = Object.fromEntries(
      Object.entries(countBy(tee.forwarded.filter((f) => f.at >= s0.at && f.at < s1.at).map((f) => f.what)))
        .sort((a, b) => b[1] - a[1])
        .slice(0, 12)
        .map(([k, n]) => [k, perHour(n)]),
    );
    const peerSteady = steady(PEER_USER);
    const primaries = fleetProxies + opts.subPools;
    const messagesPerObjectHour = round((s1.passes - s0.passes) / primaries / (minutes / 60), 2);
    // By trigger: probe shards (one per ~40 Proxies per probe time) are the health fan-out, the
    // rest are passes (drift, safety net, follow-ups, events).
    const messagesByTrigger = Object.fromEntries(
      Object.entries(s1.triggers)
        .map(([k, n]) => [k, round((n - (s0.triggers[k] ?? 0)) / primaries / (minutes / 60), 2)] as const)
        .filter(([, n]) => n > 0),
    );
    const passMessagesPerObjectHour = round(
      Object.entries(messagesByTrigger)
        .filter(([k]) => !k.startsWith("shard"))
        .reduce((a, [, n]) => a + n, 0),
      2,
    );
    const probesPerMinute = round((s1.probes - s0.probes) / minutes, 0);
    const cpu = {
      host: round((s1.host.cpuSeconds - s0.host.cpuSeconds) / minutes, 2),
      peer: round((s1.peer.cpuSeconds - s0.peer.cpuSeconds) / minutes, 2),
    };
    const maxRss = { host: round(Math.max(...rss.host), 0), peer: round(Math.max(...rss.peer), 0) };
    // The host's CPU per probe counted at the target (everything the host did in the window, over
    // the probes: the probing dominates it) and its RSS per 1,000 Proxies.
    const windowProbes = s1.probes - s0.probes;
    const cpuMsPerProbe =
      windowProbes > 0 ? round(((s1.host.cpuSeconds - s0.host.cpuSeconds) * 1000) / windowProbes, 2) : null;
    // Of which in the kernel: a probe's connect, writes and close are system time, not JavaScript.
    const systemMsPerProbe =
      windowProbes > 0
        ? round(((s1.host.systemSeconds - s0.host.systemSeconds) * 1000) / windowProbes, 2)
        : null;
    const rssMiBPer1000Proxies = fleetProxies > 0 ? round((maxRss.host / fleetProxies) * 1000, 0) : null;
    const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 2) : null);

    const json = {
      bench: "fleet",
      commit,
      primaries: {
        proxies: fleetProxies,
        proxyNamespaces: Math.max(1, opts.namespaces ?? 1),
        subPools: opts.subPools,
        peerSubPools: opts.subPools,
      },
      ...(opts.rampStep
        ? { ramp, largestFleetKeepingRhythm: ramp.filter((r) => r.kept).at(-1)?.proxies ?? 0 }
        : {}),
      // Host settings given through the environment (the host reads KUBEFN_*); {} is the defaults.
      hostSettings: Object.fromEntries(
        Object.entries(process.env).filter(
          ([k]) => k.startsWith("KUBEFN_") && !k.startsWith("KUBEFN_BENCH") && !/TOKEN|SECRET/.test(k),
        ),
      ),
      steadySeconds: round(minutes * 60, 0),
      converge: {
        kubefnSubPools: { ...kfPoolConverge, passesPerObjectByTrigger: kfPoolPasses },
        kubefnProxies: proxyConverge,
        peerSubPools: peerPoolConverge,
        kubefnHealthSettle: healthSettle,
      },
      steady: {
        kubefn: {
          ...kfSteady,
          messagesPerObjectHour,
          messagesPerObjectHourByTrigger: messagesByTrigger,
          intakeWritesPerHour,
          passMessagesPerObjectHour,
          probesPerMinute,
          cpuSecondsPerMinute: cpu.host,
          cpuMsPerProbe,
          systemMsPerProbe,
          loadAverage,
          maxRssMiB: maxRss.host,
          rssMiBPer1000Proxies,
        },
        peer: {
          ...peerSteady,
          messagesPerObjectHour: 0,
          cpuSecondsPerMinute: cpu.peer,
          maxRssMiB: maxRss.peer,
        },
      },
      ratio: {
        subPoolConvergeSeconds: ratio(kfPoolConverge.seconds, peerPoolConverge.seconds),
        subPoolConvergeRequestsPerObject: ratio(kfPoolConverge.perObject, peerPoolConverge.perObject),
        steadyRequestsPerHour: ratio(kfSteady.requestsPerHour, peerSteady.requestsPerHour),
        cpuSecondsPerMinute: ratio(cpu.host, cpu.peer),
        maxRssMiB: ratio(maxRss.host, maxRss.peer),
      },
      auditForwardErrors: tee.forwardErrors,
      ...(transportFigures ? { transport: transportFigures } : {}),
    };
    const verbs = (v: Record<string, number>) =>
      Object.entries(v)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ");
    const rows: BenchRow[] = [
      {
        name: "fleet converge SubPools",
        figure: `${kfPoolConverge.seconds} / ${peerPoolConverge.seconds}`,
        unit: "s kubefn / peer",
        note: `kubefn ÷ peer ${json.ratio.subPoolConvergeSeconds}; ${opts.subPools} each, audit webhook on`,
      },
      {
        name: "fleet converge requests/SubPool",
        figure: `${kfPoolConverge.perObject} / ${peerPoolConverge.perObject}`,
        unit: "requests kubefn / peer",
        note: `kubefn ÷ peer ${json.ratio.subPoolConvergeRequestsPerObject}; kubefn ${verbs(kfPoolConverge.byVerb)} (${kfPoolConverge.notFound} 404s); peer ${verbs(peerPoolConverge.byVerb)}`,
      },
      {
        name: "  per SubPool: kubefn passes",
        figure: round(
          Object.values(kfPoolPasses).reduce((a, b) => a + b, 0),
          2,
        ),
        unit: "passes",
        note: `by trigger ${verbs(kfPoolPasses)}`,
      },
      // What each side's converging cost, request by request, kubefn's beside the peer's.
      ...(withPeer
        ? convergeBreakdown(kfPoolConverge, peerPoolConverge).map(
            (line): BenchRow => ({
              name: `  per SubPool: ${line.what}`,
              figure: `${line.kubefn} / ${line.peer}`,
              unit: "requests kubefn / peer",
              ...(line.failed ? { note: `kubefn's failed: ${line.failed}` } : {}),
            }),
          )
        : []),
      {
        name: "fleet converge Proxies",
        figure: proxyConverge.seconds,
        unit: "s",
        note: `${opts.rampStep ? `the last ramp step's ${opts.rampStep} of ${fleetProxies}` : fleetProxies} External Proxies to Ready, ${proxyConverge.perObject} requests each (${verbs(proxyConverge.byVerb)})`,
      },
      {
        name: "fleet steady requests/hour",
        figure: `${kfSteady.requestsPerHour} / ${peerSteady.requestsPerHour}`,
        unit: "kubefn / peer",
        note: `kubefn ÷ peer ${json.ratio.steadyRequestsPerHour}; kubefn (${primaries} primaries) ${verbs(kfSteady.byVerbPerHour)}; peer (${opts.subPools} SubPools) ${verbs(peerSteady.byVerbPerHour)}`,
      },
      {
        name: "fleet steady messages",
        figure: `${passMessagesPerObjectHour} / ${messagesPerObjectHour}`,
        unit: "passes / all messages per object-hour",
        note: `by trigger ${verbs(messagesByTrigger)} (shard: probe shards); peer: 0 (no resync in the window)`,
      },
      {
        name: "fleet steady probes",
        figure: probesPerMinute,
        unit: "probes/min",
        note: "counted at the probe target, through the forward proxies",
      },
      {
        name: "fleet steady CPU",
        figure: `${cpu.host} / ${cpu.peer}`,
        unit: "CPU s/min kubefn / peer",
        note: `kubefn ÷ peer ${json.ratio.cpuSecondsPerMinute}`,
      },
      {
        name: "fleet steady CPU/probe",
        figure: cpuMsPerProbe ?? "n/a",
        unit: "host CPU ms per probe",
        note: `host CPU in the window ÷ ${windowProbes} probes counted at the target; ${systemMsPerProbe ?? "n/a"} ms of it in the kernel; load average ${loadAverage.start.join(" ")} at the start, ${loadAverage.end.join(" ")} at the end`,
      },
      {
        name: "fleet steady RSS",
        figure: `${maxRss.host} / ${maxRss.peer}`,
        unit: "MiB max kubefn / peer",
        note: `kubefn ÷ peer ${json.ratio.maxRssMiB}; host ${rssMiBPer1000Proxies ?? "n/a"} MiB per 1,000 Proxies (${fleetProxies} Proxies)`,
      },
    ];
    return { rows, json, ...(transportFigures ? { transport: transportFigures } : {}) };
  } finally {
    for (const cleanup of cleanups) {
      try {
        await cleanup();
      } catch {
        // Best effort: the devcluster exits with its parent anyway.
      }
    }
    process.removeListener("exit", killChildren);
  }
}

/**
 * `KUBEFN_BENCH_FLEET_TRANSPORTS=http1,h2`: the transports to compare, in run order
 * (empty: the ordinary fleet bench).
 */
export function fleetTransportsFromEnv(env: NodeJS.ProcessEnv = process.env): NodeTransportHttp[] {
  const known: NodeTransportHttp[] = ["http1", "h2"];
  const names = (env.KUBEFN_BENCH_FLEET_TRANSPORTS ?? "").split(",").filter((n) => n !== "");
  for (const n of names) {
    if (!known.includes(n as NodeTransportHttp))
      throw new Error(`unknown transport ${n}; known: ${known.join(", ")}`);
  }
  return names as NodeTransportHttp[];
}

/**
 * The fleet bench once per transport, back to back, each on a devcluster of its own and without the
 * peer; the figures side by side, in the order given (one row per figure, `a / b / c`).
 */
export async function benchFleetTransports(
  opts: FleetOptions,
  transports: NodeTransportHttp[],
): Promise<{ rows: BenchRow[]; json: Record<string, unknown> }> {
  const results: (TransportFigures | string)[] = [];
  for (const transport of transports) {
    process.stderr.write(`fleet: transport ${transport} …\n`);
    try {
      const r = await benchFleet({ ...opts, transport, peer: false });
      results.push(r.transport ?? "no figures");
    } catch (err) {
      results.push(`FAILED: ${String(err).slice(0, 200)}`);
    }
  }
  const each = (f: (t: TransportFigures) => unknown) =>
    results.map((r) => (typeof r === "string" ? "failed" : String(f(r) ?? "n/a"))).join(" / ");
  const order = transports.join(" / ");
  const rows: BenchRow[] = [
    {
      name: "fleet transports converge",
      figure: each((t) => t.converge.seconds),
      unit: `s (${order})`,
      note: `${opts.subPools} SubPools then ${opts.proxies} External Proxies converged; requests ${each((t) => t.converge.requests)}`,
    },
    {
      name: "fleet transports converge p99",
      figure: each((t) => t.converge.p99Ms),
      unit: `ms a request (${order})`,
      note: `p50 ${each((t) => t.converge.p50Ms)} ms; creation to the response's last byte, in the host`,
    },
    {
      name: "fleet transports converge connections",
      figure: each((t) => t.converge.maxConnections),
      unit: `most open at once (${order})`,
      note: `different connections used ${each((t) => t.converge.connectionsUsed)}`,
    },
    {
      name: "fleet transports converge CPU/pass",
      figure: each((t) => t.converge.cpuMsPerPass),
      unit: `host CPU ms per pass (${order})`,
      note: `host CPU ${each((t) => t.converge.cpuSeconds)} s over ${each((t) => t.converge.passes)} passes (probes of the Proxies converging included)`,
    },
    {
      name: "fleet transports steady CPU/sweep",
      figure: each((t) => t.steady.cpuMsPerSweep),
      unit: `host CPU ms per sweep (${order})`,
      note: `${each((t) => t.steady.sweeps)} sweeps in ${each((t) => t.steady.seconds)} s; CPU ms per pass ${each((t) => t.steady.cpuMsPerPass)} (${each((t) => t.steady.passes)} passes, probe shards included)`,
    },
    {
      name: "fleet transports steady p99",
      figure: each((t) => t.steady.p99Ms),
      unit: `ms a request (${order})`,
      note: `p50 ${each((t) => t.steady.p50Ms)} ms, ${each((t) => t.steady.requests)} requests`,
    },
    {
      name: "fleet transports steady connections",
      figure: each((t) => t.steady.maxConnections),
      unit: `most open at once (${order})`,
      note: `different connections used ${each((t) => t.steady.connectionsUsed)}`,
    },
  ];
  for (const [i, r] of results.entries()) {
    if (typeof r === "string")
      rows.push({ name: `fleet transport ${transports[i]}`, figure: "FAILED", unit: "", note: r });
  }
  return { rows, json: { bench: "fleet-transports", options: opts, transports, results } };
}
