/**
 * Chaos on the Node host, short profile (`npm run bench -- chaos` runs the full one): Managed
 * Proxies created, updated and deleted with 0 % and then 20 % of kubefn's API requests faulted
 * (500/503/504, 429 with Retry-After, resets mid-body, answers past the 2 s deadline, writes whose
 * answer is lost). Both runs converge with nothing leaked or doubled, and the faulted run sends at
 * most {@link REQUEST_BOUND}× the requests of the fault-free one (no retry storm).
 *
 * Then a struggling API server (every request answered 503 for 12 s while Proxies are created):
 * with the circuit the host sends fewer than half the requests it sends without it, its sweeps
 * fan nothing out while the circuit is open, and both converge once the server recovers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createFetchTransport,
  createKube,
  isNotFound,
  type Kube,
  Resources,
} from "../../shared/kube/index.ts";
import type { HostProcess } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { chaosHostEnv, serviceAccountKubeconfigVia, startChaosHost } from "./drivers.ts";
import { type ChaosResult, type Driver, runChaos, runOutage, shortProfile } from "./scenario.ts";

/** The faulted run may send at most this many times the requests of the fault-free run. */
const REQUEST_BOUND = 3;

let admin: Kube;
let faults: FaultProxy;
let host: HostProcess;
let driver: Driver;
let env: Record<string, string>;
const namespaces: string[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken, kubeconfig } = clusterInfo();
  admin = createKube(createFetchTransport({ server: httpProxy, token: adminToken }), {
    fieldManager: "chaos",
  });
  faults = await startFaultProxy(httpProxy);
  env = chaosHostEnv(await serviceAccountKubeconfigVia(kubeconfig, faults.url));
  ({ host, driver } = await startChaosHost(env));
}, 180_000);

afterAll(async () => {
  faults?.configure({ rate: 0 });
  if (host && (host.child.exitCode !== null || host.child.signalCode !== null)) {
    ({ host } = await startChaosHost(env));
  }
  for (const ns of namespaces) await removeNamespace(ns);
  expect(await host?.stop()).toBe(0);
  await faults?.close();
}, 120_000);

async function removeNamespace(name: string): Promise<void> {
  await admin.delete(Resources.Namespace, { name }).catch(() => undefined);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      await admin.get(Resources.Namespace, { name });
    } catch (err) {
      if (isNotFound(err)) return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

function row(r: ChaosResult): string {
  return `${Math.round(r.faultRate * 100)}% faults: ${r.objects} objects, ${r.requests} requests (${r.faulted} faulted), ${r.passes} passes, converged in ${r.convergeMs} ms, ${r.leaks.length} leaks`;
}

describe("chaos on the Node host", () => {
  it("converges with 0 % and 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    const clean = await runChaos({ admin, faults, driver, profile: shortProfile, faultRate: 0 });
    namespaces.push(clean.namespace);
    faults.configure({ rate: 0 });
    await removeNamespace(clean.namespace);
    const faulted = await runChaos({ admin, faults, driver, profile: shortProfile, faultRate: 0.2 });
    namespaces.push(faulted.namespace);
    console.log(`${row(clean)}\n${row(faulted)}`);
    expect(clean.leaks).toEqual([]);
    expect(faulted.leaks).toEqual([]);
    expect(faulted.faulted).toBeGreaterThan(faulted.requests * 0.1);
    expect(faulted.requests).toBeLessThanOrEqual(clean.requests * REQUEST_BOUND);
    faults.configure({ rate: 0 });
    await removeNamespace(faulted.namespace);
  }, 420_000);

  it("a struggling API server gets fewer requests with the circuit than without, and everything recovers", async () => {
    const heldBack = (h: HostProcess) => h.lines.filter((l) => l.msg.startsWith("sweep held back")).length;
    const heldBefore = heldBack(host);
    const withCircuit = await runOutage({ admin, faults, driver, objects: 10, outageMs: 12_000 });
    // The sweep fanned nothing out while the circuit was open.
    const sweepsHeldBack = heldBack(host) - heldBefore;
    namespaces.push(withCircuit.namespace);
    await removeNamespace(withCircuit.namespace);
    expect(await host.stop()).toBe(0);
    ({ host, driver } = await startChaosHost({ ...env, KUBEFN_CIRCUIT_FAILURES: "1000000000" }));
    const without = await runOutage({ admin, faults, driver, objects: 10, outageMs: 12_000 });
    namespaces.push(without.namespace);
    console.log(
      `12 s all-503 outage, 10 Proxies: ${withCircuit.requestsDuringOutage} requests with the circuit (${sweepsHeldBack} sweeps held back), ${without.requestsDuringOutage} without (${heldBack(host)} held back); recovered in ${withCircuit.recoverMs} / ${without.recoverMs} ms`,
    );
    expect(sweepsHeldBack).toBeGreaterThan(0);
    expect(heldBack(host)).toBe(0);
    expect(withCircuit.leaks).toEqual([]);
    expect(without.leaks).toEqual([]);
    expect(withCircuit.requestsDuringOutage).toBeLessThan(without.requestsDuringOutage / 2);
  }, 300_000);
});
