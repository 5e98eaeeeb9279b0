/**
 * Chaos on the Node host, short profile (`npm run bench -- chaos` runs the full one, 0 % and 20 %
 * side by side): Managed Proxies created, updated and deleted with 20 % of kubefn's API requests
 * faulted (500/503/504, 429 with Retry-After, resets mid-body, answers past the 2 s deadline,
 * writes whose answer is lost). The run converges with nothing leaked or doubled and sends at
 * most {@link REQUEST_BOUND}× what a fault-free run sends per Proxy (scenario.ts
 * CLEAN_REQUESTS_PER_OBJECT): no retry storm.
 *
 * Then a struggling API server (every request answered 503 for 8 s while Proxies are created):
 * with the circuit the host sends fewer than half the requests it sends without it, its sweeps
 * fan nothing out while the circuit is open, and both converge once the server recovers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFetchTransport, createKube, type Kube } from "../../shared/kube/index.ts";
import { functionsKubeconfig, type HostProcess, spawnStandbyHost } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { chaosHostEnv, startChaosHost } from "./drivers.ts";
import {
  chaosRow,
  type Driver,
  removeNamespace,
  requestBudget,
  runChaosAtRates,
  runOutage,
  SHORT_FAULT_RATE,
  shortProfile,
} from "./scenario.ts";

/** The faulted run may send at most this many times what a fault-free run sends. */
const REQUEST_BOUND = 3;
/** The struggling API server's outage (the bench's is 20 s, with more Proxies). */
const OUTAGE_MS = 8000;

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
  env = chaosHostEnv(await functionsKubeconfig(kubeconfig, faults.url));
  ({ host, driver } = await startChaosHost(env));
}, 180_000);

afterAll(async () => {
  faults?.configure({ rate: 0 });
  if (host && (host.child.exitCode !== null || host.child.signalCode !== null)) {
    ({ host } = await startChaosHost(env));
  }
  for (const ns of namespaces) await removeNamespace(admin, ns);
  expect(await host?.stop()).toBe(0);
  await faults?.close();
}, 120_000);

describe("chaos on the Node host", () => {
  it("converges with 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    const [faulted] = await runChaosAtRates({
      admin,
      faults,
      driver,
      profile: shortProfile,
      rates: [SHORT_FAULT_RATE],
    });
    console.log(chaosRow(faulted!));
    expect(faulted!.leaks).toEqual([]);
    expect(faulted!.faulted).toBeGreaterThan(faulted!.requests * 0.1);
    expect(faulted!.requests).toBeLessThanOrEqual(
      requestBudget("proxy", shortProfile.objects, REQUEST_BOUND),
    );
  }, 420_000);

  it("a struggling API server gets fewer requests with the circuit than without, and everything recovers", async () => {
    const heldBack = (h: HostProcess) => h.lines.filter((l) => l.msg.startsWith("sweep held back")).length;
    const heldBefore = heldBack(host);
    // The host without the circuit loads meanwhile.
    const withoutEnv = { ...env, KUBEFN_CIRCUIT_FAILURES: "1000000000" };
    const standby = spawnStandbyHost(withoutEnv);
    const withCircuit = await runOutage({ admin, faults, driver, objects: 10, outageMs: OUTAGE_MS });
    // The sweep fanned nothing out while the circuit was open.
    const sweepsHeldBack = heldBack(host) - heldBefore;
    namespaces.push(withCircuit.namespace);
    await removeNamespace(admin, withCircuit.namespace);
    expect(await host.stop()).toBe(0);
    ({ host, driver } = await startChaosHost(withoutEnv, standby));
    const without = await runOutage({ admin, faults, driver, objects: 10, outageMs: OUTAGE_MS });
    namespaces.push(without.namespace);
    console.log(
      `${OUTAGE_MS / 1000} s all-503 outage, 10 Proxies: ${withCircuit.requestsDuringOutage} requests with the circuit (${sweepsHeldBack} sweeps held back), ${without.requestsDuringOutage} without (${heldBack(host)} held back); recovered in ${withCircuit.recoverMs} / ${without.recoverMs} ms`,
    );
    expect(sweepsHeldBack).toBeGreaterThan(0);
    expect(heldBack(host)).toBe(0);
    expect(withCircuit.leaks).toEqual([]);
    expect(without.leaks).toEqual([]);
    expect(withCircuit.requestsDuringOutage).toBeLessThan(without.requestsDuringOutage / 2);
  }, 300_000);
});
