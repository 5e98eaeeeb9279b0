/**
 * Chaos on the Worker in workerd (wrangler's test harness; Queues and cron simulated locally),
 * short profile: Managed Proxies created, updated and deleted with 0 % and 20 % of the Worker's
 * API requests faulted by the fault proxy it reaches the API server through. No event reaches
 * the Worker: its cron sweep (run every 3 s here) and its own delayed follow-ups converge
 * everything, with nothing leaked or doubled, and the faulted run sends at most
 * {@link REQUEST_BOUND}× the requests of the fault-free one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import {
  createFetchTransport,
  createKube,
  isNotFound,
  type Kube,
  Resources,
} from "../../shared/kube/index.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type ChaosProfile, type ChaosResult, type Driver, runChaos, shortProfile } from "./scenario.ts";

const REQUEST_BOUND = 3;
const profile: ChaosProfile = { ...shortProfile, objects: 15 };
const root = new URL("../../", import.meta.url).pathname;

let admin: Kube;
let faults: FaultProxy;
let harness: TestHarness;
let driver: Driver;
const namespaces: string[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken } = clusterInfo();
  const transport = createFetchTransport({ server: httpProxy, token: adminToken });
  admin = createKube(transport, { fieldManager: "chaos" });
  await installCrdsAndRbac(admin);
  const token = await serviceAccountToken(transport, "kubefn-system", "kubefn");
  faults = await startFaultProxy(httpProxy);
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        vars: { KUBE_SERVER: faults.url, PROXY_RESYNC_SECONDS: "60", KUBE_TIMEOUT_SECONDS: "2" },
        secrets: { KUBE_TOKEN: token },
      },
    ],
  });
  await harness.listen();
  let lastSweep = 0;
  driver = {
    passes: () =>
      harness.getLogs().filter((l) => {
        try {
          return (JSON.parse(l.message) as { msg?: string }).msg === "pass";
        } catch {
          return false;
        }
      }).length,
    async tick() {
      if (Date.now() - lastSweep < 3000) return;
      lastSweep = Date.now();
      await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
    },
  };
}, 180_000);

afterAll(async () => {
  faults?.configure({ rate: 0 });
  for (const name of namespaces) await removeNamespace(name);
  await harness?.close();
  await faults?.close();
}, 180_000);

/** Deletes the namespace, sweeping meanwhile so the Worker runs the Proxies' finalizers. */
async function removeNamespace(name: string): Promise<void> {
  await admin.delete(Resources.Namespace, { name }).catch(() => undefined);
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const err = await admin.get(Resources.Namespace, { name }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (isNotFound(err)) return;
    await driver.tick?.();
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function row(r: ChaosResult): string {
  return `workerd ${Math.round(r.faultRate * 100)}% faults: ${r.objects} objects, ${r.requests} requests (${r.faulted} faulted), ${r.passes} passes, converged in ${r.convergeMs} ms, ${r.leaks.length} leaks`;
}

describe("chaos on the Worker in workerd", () => {
  it("converges with 0 % and 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    const clean = await runChaos({ admin, faults, driver, profile, faultRate: 0 });
    namespaces.push(clean.namespace);
    faults.configure({ rate: 0 });
    await removeNamespace(clean.namespace);
    const faulted = await runChaos({ admin, faults, driver, profile, faultRate: 0.2 });
    namespaces.push(faulted.namespace);
    console.log(`${row(clean)}\n${row(faulted)}`);
    expect(clean.leaks).toEqual([]);
    expect(faulted.leaks).toEqual([]);
    expect(faulted.faulted).toBeGreaterThan(faulted.requests * 0.1);
    expect(faulted.requests).toBeLessThanOrEqual(clean.requests * REQUEST_BOUND);
  }, 420_000);
});
