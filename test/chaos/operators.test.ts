/**
 * Chaos for SubPool and Site on the Node host, short profile (`npm run bench -- chaos` runs
 * larger counts): SubPools and Sites created, a third updated and a third deleted, with 0 % and
 * then 20 % of kubefn's API requests faulted; both runs converge with nothing leaked or doubled
 * (test/chaos/operators.ts lists the checks), and the faulted run sends at most
 * {@link REQUEST_BOUND}× the requests of the fault-free one.
 *
 * Then kill after every write: one SubPool and one Site, and the host is SIGKILLed right after
 * each distinct write their passes make (the fault proxy holds the answer, kills the host, drops
 * the connection), a new host starts and carries on until the next write it has not been killed
 * at — through create, update and delete — and everything converges with nothing leaked or
 * doubled.
 */
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subPoolNamespaceName } from "../../shared/controllers/subpool/api.ts";
import { createFetchTransport, createKube, type Kube } from "../../shared/kube/index.ts";
import type { HostProcess } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, type SeenRequest, startFaultProxy } from "../support/fault-proxy.ts";
import {
  type AuditRelay,
  chaosHostEnv,
  serviceAccountKubeconfigVia,
  startAuditRelay,
  startChaosHost,
} from "./drivers.ts";
import {
  convergeAll,
  type OperatorChaos,
  type OperatorChaosResult,
  operatorShortProfile,
  runOperatorChaos,
  siteChaos,
  subPoolChaos,
} from "./operators.ts";
import type { Driver } from "./scenario.ts";

/** The faulted run may send at most this many times the requests of the fault-free run. */
const REQUEST_BOUND = 3;
const COUNT = 6;

let admin: Kube;
let faults: FaultProxy;
let env: Record<string, string>;
let host: HostProcess | undefined;
let audit: AuditRelay;
const auditToken = randomBytes(16).toString("hex");
const driver: Driver = { passes: () => host?.lines.filter((l) => l.msg === "pass").length ?? 0 };
const leftovers: OperatorChaos[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken, kubeconfig, auditCollector } = clusterInfo();
  admin = createKube(createFetchTransport({ server: httpProxy, token: adminToken }), {
    fieldManager: "chaos",
  });
  faults = await startFaultProxy(httpProxy);
  env = chaosHostEnv(await serviceAccountKubeconfigVia(kubeconfig, faults.url), {
    KUBEFN_AUDIT_TOKEN: auditToken,
  });
  // The API server's audit webhook, to whichever host runs now.
  audit = await startAuditRelay(() => (alive(host) ? { url: host!.url, auditToken } : undefined));
  await audit.pollCollector(auditCollector);
}, 180_000);

afterAll(async () => {
  faults?.onForwarded(undefined);
  faults?.configure({ rate: 0 });
  await ensureHost();
  for (const o of leftovers) await o.cleanup().catch(() => undefined);
  expect(await host?.stop()).toBe(0);
  await audit?.close();
  await faults?.close();
}, 300_000);

/** Progress lines, to a file when `KUBEFN_CHAOS_LOG` names one (vitest shows console output only at the end). */
const progress = (line: string) => {
  if (process.env.KUBEFN_CHAOS_LOG)
    appendFileSync(process.env.KUBEFN_CHAOS_LOG, `${new Date().toISOString()} ${line}\n`);
};

const alive = (h: HostProcess | undefined) => !!h && h.child.exitCode === null && h.child.signalCode === null;

async function ensureHost(): Promise<HostProcess> {
  if (!alive(host)) host = (await startChaosHost(env)).host;
  return host!;
}

function row(r: OperatorChaosResult): string {
  const objects = Object.entries(r.objects)
    .map(([k, n]) => `${n} ${k}s`)
    .join(" + ");
  return `${Math.round(r.faultRate * 100)}% faults: ${objects}, ${r.requests} requests (${r.faulted} faulted), ${r.passes} passes, converged in ${r.convergeMs} ms, ${r.leaks.length} leaks`;
}

describe("SubPool and Site chaos on the Node host", () => {
  it("converge with 0 % and 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    await ensureHost();
    const results: OperatorChaosResult[] = [];
    for (const faultRate of [0, 0.2]) {
      const operators = [subPoolChaos(admin, COUNT), siteChaos(admin, COUNT)];
      leftovers.push(...operators);
      results.push(
        await runOperatorChaos({
          faults,
          driver,
          operators,
          faultRate,
          profile: operatorShortProfile,
          log: (l) => progress(`${faultRate * 100}% ${l}`),
        }),
      );
      faults.configure({ rate: 0 });
      // Torn down before the next run, so its requests are not counted there.
      for (const o of operators) await o.cleanup();
    }
    const [clean, faulted] = results as [OperatorChaosResult, OperatorChaosResult];
    console.log(`${row(clean)}\n${row(faulted)}`);
    expect(clean.leaks).toEqual([]);
    expect(faulted.leaks).toEqual([]);
    expect(faulted.faulted).toBeGreaterThan(faulted.requests * 0.1);
    expect(faulted.requests).toBeLessThanOrEqual(clean.requests * REQUEST_BOUND);
  }, 420_000);
});

/**
 * Drives one stage (`act`: a create, an update or a delete) with the host killed right after each
 * distinct write of the victim (a write is told apart by method, path and, on the primary, whether
 * it sets finalizers), each at most once; returns the writes it killed at, in order, once
 * `check` finds nothing wrong for 3 s with a host running.
 */
async function killAfterEachWrite(opts: {
  isVictims: (r: SeenRequest, body: string) => boolean;
  act: () => Promise<void>;
  check: () => Promise<string[]>;
}): Promise<string[]> {
  const killedAt: string[] = [];
  let dying = false;
  faults.onForwarded((r, body) => {
    if (dying || r.method === "GET" || (r.upstreamStatus ?? 500) >= 300) return "answer";
    if (r.path.includes("/events") || !opts.isVictims(r, body)) return "answer";
    const write = writeLabel(r, body);
    if (killedAt.includes(write) || !alive(host)) return "answer";
    killedAt.push(write);
    progress(`killed after ${write}`);
    dying = true;
    host!.child.kill("SIGKILL");
    return "reset";
  });
  try {
    await ensureHost();
    await opts.act();
    await convergeAll(
      async () => {
        if (!alive(host)) {
          await ensureHost();
          dying = false;
          return ["host restarted"];
        }
        return opts.check();
      },
      undefined,
      { timeoutMs: 150_000, quietMs: 3000 },
      progress,
      `kill chain (${killedAt.length} kills)`,
    );
  } finally {
    faults.onForwarded(undefined);
  }
  return killedAt;
}

/** `PATCH /apis/…/subpools/x (finalizers)`, `POST /api/v1/namespaces/ns/secrets x-credentials`. */
function writeLabel(r: SeenRequest, body: string): string {
  const path = r.path.split("?")[0] ?? r.path;
  let name = "";
  if (r.method === "POST") {
    try {
      name = ` ${(JSON.parse(body) as { metadata?: { name?: string } }).metadata?.name ?? ""}`;
    } catch {}
  }
  const finalizers = r.method !== "POST" && body.includes('"finalizers"') ? " (finalizers)" : "";
  return `${r.method} ${path}${name}${finalizers}`;
}

describe("kill after every write", () => {
  it("a SubPool: created, updated and deleted with the host killed after each write, converges with nothing leaked or doubled", async () => {
    const pool = subPoolChaos(admin, 1);
    leftovers.push(pool);
    const name = pool.names[0]!;
    const ns = subPoolNamespaceName(name);
    const isVictims = (r: SeenRequest, body: string) =>
      r.path.includes(`/subpools/${name}`) ||
      r.path.includes(`/namespaces/${ns}/`) ||
      r.path.split("?")[0] === `/api/v1/namespaces/${ns}` ||
      (r.method === "POST" && r.path.startsWith("/api/v1/namespaces?") && body.includes(`"${ns}"`));
    const stages: Record<string, string[]> = {};
    stages.create = await killAfterEachWrite({
      isVictims,
      act: () => pool.create(name),
      check: pool.problems,
    });
    stages.update = await killAfterEachWrite({
      isVictims,
      act: () => pool.update(name),
      check: pool.problems,
    });
    stages.delete = await killAfterEachWrite({
      isVictims,
      act: () => pool.delete(name),
      check: pool.problems,
    });
    console.log(JSON.stringify(stages, null, 1));
    const all = Object.values(stages).flat();
    expect(stages.create).toContainEqual(expect.stringMatching(/^PATCH .*\/subpools\/.* \(finalizers\)$/));
    expect(stages.create).toContainEqual(`POST /api/v1/namespaces ${ns}`);
    for (const object of ["credentials", "config", "quota", "cpa", "cpa-manager"])
      expect(all.join("\n")).toContain(`${name}-${object}`);
    expect(stages.create).toContainEqual(expect.stringMatching(/\/subpools\/[^ ]*\/status$/));
    expect(stages.update).toContainEqual(expect.stringMatching(/statefulsets\/.*-cpa-manager/));
    expect(stages.delete).toContainEqual(`DELETE /api/v1/namespaces/${ns}`);
    expect(stages.delete).toContainEqual(expect.stringMatching(/^PATCH .*\/subpools\/.* \(finalizers\)$/));
    expect(await pool.problems()).toEqual([]);
  }, 420_000);

  it("a Site: created and a component switched off with the host killed after each write, converges with nothing leaked or doubled", async () => {
    const site = siteChaos(admin, 1);
    leftovers.push(site);
    const name = site.names[0]!;
    const isVictims = (r: SeenRequest, body: string) =>
      r.path.includes(`/sites/${name}`) ||
      r.path.includes(`metalman-${name}`) ||
      r.path.includes(`storage-${name}`) ||
      (r.method === "POST" && (body.includes(`"metalman-${name}"`) || body.includes(`"storage-${name}"`)));
    const stages: Record<string, string[]> = {};
    stages.create = await killAfterEachWrite({
      isVictims,
      act: () => site.create(name),
      check: site.problems,
    });
    stages.update = await killAfterEachWrite({
      isVictims,
      act: () => site.update(name),
      check: site.problems,
    });
    // A Site has no finalizer: its per-Site objects go with it through their ownerReferences.
    stages.delete = await killAfterEachWrite({
      isVictims,
      act: () => site.delete(name),
      check: site.problems,
    });
    console.log(JSON.stringify(stages, null, 1));
    const create = stages.create.join("\n");
    expect(create).toContain(`configmaps/metalman-${name}`);
    expect(create).toContain(`deployments/metalman-${name}`);
    expect(create).toContain(`configmaps/storage-${name}`);
    expect(stages.create).toContainEqual(expect.stringMatching(/\/sites\/[^ ]*\/status$/));
    expect(stages.update).toContainEqual(expect.stringMatching(/^DELETE .*configmaps\/storage-/));
    expect(await site.problems()).toEqual([]);
  }, 420_000);
});
