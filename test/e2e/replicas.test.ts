/**
 * Two Node-host replicas against one cluster cost what one does (docs/deploying/node.md,
 * Replicas): they share the sweep through the Lease `kubefn-system/kubefn-sweep`, so over several
 * sweep periods one host lists, sweeps and probes, and the other reads only the Lease. Both run as
 * the least-privileged `kubefn-system/kubefn` (its RBAC and admission policy admit that Lease),
 * each through its own recording pass-through to the API server. When the holder is killed
 * (SIGKILL: no release), the survivor takes over once the Lease has gone a lease duration
 * unrenewed, and sweeps and probes on. `npm run bench -- replicas` times the takeover.
 *
 * Without the Lease both hosts swept and probed every Proxy each period.
 */
import { randomBytes } from "node:crypto";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, isNotFound, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { clusterInfo, eventually } from "../setup/cluster.ts";
import { startRecordingApiProxy } from "../support/api-recorder.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { functionsKubeconfig, type HostProcess, type LogLine, startHost } from "./host.ts";

const PROXIES = 20;
const SWEEP_SECONDS = 2;
const LEASE = { namespace: "kubefn-system", name: "kubefn-sweep" };

type Recorder = Awaited<ReturnType<typeof startRecordingApiProxy>>;
interface Replica {
  host: HostProcess;
  api: Recorder;
}

let admin: Kube;
let target: Target;
let forward: ForwardProxy;
let ns: string;
const replicas: Replica[] = [];

const deleteLease = () =>
  admin.delete(Resources.Lease, LEASE).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });

beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfig);
  admin = createKube(createNodeTransport(kc));
  await deleteLease();
  ns = `replicas-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  target = await startHttpTarget();
  forward = await startForwardProxy({ host: "127.0.0.1" });
  const start = async (): Promise<Replica> => {
    const api = await startRecordingApiProxy(clusterInfo().httpProxy);
    const host = await startHost({
      KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig, api.url),
      KUBEFN_SWEEP_SECONDS: String(SWEEP_SECONDS),
      KUBEFN_SWEEP_LEASE: `${LEASE.namespace}/${LEASE.name}`,
    });
    return { host, api };
  };
  replicas.push(...(await Promise.all([start(), start()])));
}, 180_000);

afterAll(async () => {
  // The survivor finishes the Proxies' deletion (their finalizer), then stops and releases.
  if (admin && ns) await removeNamespaces(admin, [ns], { dropFinalizers: true });
  for (const { host, api } of replicas) {
    if (host.child.exitCode === null && host.child.signalCode === null) expect(await host.stop()).toBe(0);
    await new Promise((r) => api.server.close(r));
  }
  await forward?.close();
  await target?.close();
  if (admin) await deleteLease();
}, 180_000);

const sweeps = (lines: readonly LogLine[]) => lines.filter((l) => l.msg === "sweep").length;
const probed = (lines: readonly LogLine[]) =>
  lines
    .filter((l) => l.msg === "job")
    .reduce((n, l) => n + Number((l.shard as { probed?: number } | undefined)?.probed ?? 0), 0);
const leaseCall = (path: string) =>
  path.startsWith(`/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases`);

describe("two Node-host replicas", () => {
  it("sweep, list and probe once between them: one holds the sweep Lease, the other reads only the Lease", async () => {
    for (let i = 0; i < PROXIES; i++) {
      await admin.create(proxyResource, {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: ns, name: `p-${i}` },
        spec: {
          mode: "External",
          endpoint: { host: "127.0.0.1", port: forward.port, scheme: "http" },
          healthCheck: {
            probeURL: `http://127.0.0.1:${target.port}/`,
            intervalSeconds: 5,
            successThreshold: 1,
          },
        },
      });
    }
    await eventually(
      async () => {
        const items = (
          await admin.list<KubeObject & { status?: { phase?: string } }>(proxyResource, { namespace: ns })
        ).items;
        return items.length === PROXIES && items.every((p) => p.status?.phase === "Ready") ? true : undefined;
      },
      { timeoutMs: 90_000, what: "every Proxy Ready" },
    );

    // The window: six sweep periods of the pair.
    const marks = replicas.map((r) => ({ line: r.host.lines.length, call: r.api.calls.length }));
    const hits = target.hits;
    await eventually(
      async () =>
        replicas.reduce((n, r, i) => n + sweeps(r.host.lines.slice(marks[i]!.line)), 0) >= 6
          ? true
          : undefined,
      { timeoutMs: 90_000, what: "six sweeps" },
    );
    // The last probe shards of the window (delayed within their period) are done.
    await new Promise((r) => setTimeout(r, SWEEP_SECONDS * 1000));
    const window = replicas.map((r, i) => {
      const lines = r.host.lines.slice(marks[i]!.line);
      const calls = r.api.calls.slice(marks[i]!.call);
      return {
        sweeps: sweeps(lines),
        probed: probed(lines),
        lists: calls.filter((c) => c.method === "GET" && !leaseCall(c.path) && isList(c.path)).length,
        other: calls.filter((c) => !leaseCall(c.path)).map((c) => `${c.method} ${c.path}`),
        leaseCalls: calls.filter((c) => leaseCall(c.path)).map((c) => c.method),
      };
    });
    console.log(
      `replicas: ${window.map((w, i) => `host ${i}: ${w.sweeps} sweeps, ${w.lists} lists, ${w.probed} probes, lease ${countOf(w.leaseCalls)}`).join("; ")}; ${target.hits - hits} hits at the probe target`,
    );
    const holder = window.findIndex((w) => w.sweeps > 0);
    const standby = 1 - holder;
    expect(holder).toBeGreaterThanOrEqual(0);
    expect(window[holder]!.lists).toBeGreaterThan(0);
    expect(window[holder]!.probed).toBeGreaterThanOrEqual(PROXIES);
    // The standby: no sweep, no list, no probe; its only requests read the Lease.
    expect(window[standby]).toMatchObject({ sweeps: 0, lists: 0, probed: 0, other: [] });
    expect(window[standby]!.leaseCalls.length).toBeGreaterThan(0);
    expect(window[standby]!.leaseCalls.every((m) => m === "GET")).toBe(true);
    // The holder renews with one write per period and reads the Lease only when it changes hands.
    expect(window[holder]!.leaseCalls.every((m) => m === "PUT")).toBe(true);

    // The holder dies without releasing; the survivor sweeps and probes on.
    const [dead, survivor] = [replicas[holder]!, replicas[standby]!];
    const from = survivor.host.lines.length;
    const hitsBefore = target.hits;
    await dead.host.stop("SIGKILL");
    await survivor.host.waitFor(
      (l) => l.msg === "sweep lease acquired" && survivor.host.lines.indexOf(l) >= from,
      60_000,
    );
    await eventually(async () => (probed(survivor.host.lines.slice(from)) >= PROXIES ? true : undefined), {
      timeoutMs: 60_000,
      what: "the survivor's probes",
    });
    expect(sweeps(survivor.host.lines.slice(from))).toBeGreaterThan(0);
    expect(target.hits).toBeGreaterThan(hitsBefore);
    const lease = await admin.get<
      KubeObject & { spec?: { holderIdentity?: string; leaseTransitions?: number } }
    >(Resources.Lease, LEASE);
    expect(lease.spec?.leaseTransitions).toBeGreaterThanOrEqual(1);
    expect(lease.metadata.labels?.["crawl.kubefn.dev/managed-by"]).toBe("kubefn");
  }, 300_000);
});

/** A collection read: `/api/v1/<kind>`, `/apis/<group>/<version>/<kind>`, or either in a namespace. */
function isList(path: string): boolean {
  const parts = (path.split("?")[0] ?? "").split("/").filter(Boolean);
  const n = parts[0] === "api" ? parts.length - 2 : parts.length - 3;
  return n === 1 || (n === 3 && parts.at(-3) === "namespaces");
}

function countOf(methods: string[]): string {
  const by: Record<string, number> = {};
  for (const m of methods) by[m] = (by[m] ?? 0) + 1;
  return Object.entries(by)
    .map(([m, n]) => `${n} ${m}`)
    .join(", ");
}
