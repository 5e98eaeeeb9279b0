/**
 * Chaos on the Worker in workerd (wrangler's test harness; Queues and cron simulated locally),
 * short profile, with 20 % of the Worker's API requests faulted by the fault proxy it reaches the
 * API server through (`npm run bench -- chaos` runs the full profile: 0 % and 20 % side by side):
 *
 * - Managed Proxies created, updated and deleted. No event reaches the Worker: its cron sweep
 *   (run every 3 s here) and its own delayed follow-ups converge everything, with nothing leaked
 *   or doubled, and the run sends at most {@link REQUEST_BOUND}× what a fault-free run sends per
 *   Proxy (scenario.ts CLEAN_REQUESTS_PER_OBJECT).
 * - SubPools and Sites (test/chaos/operators.ts: the same scenario and checks as on the Node
 *   host), with the API server's audit events relayed to the Worker's intake (`POST /v1/events`
 *   at the harness's URL, with its AUDIT_TOKEN), as its audit webhook would; the run sends at
 *   most {@link REQUEST_BOUND}× what a fault-free run sends per object.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestHarness } from "wrangler";
import { installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { createFetchTransport, createKube, type Kube } from "../../shared/kube/index.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type AuditRelay, startAuditRelay, startChaosWorker } from "./drivers.ts";
import {
  type OperatorChaos,
  operatorChaosRow,
  operatorShortProfile,
  runOperatorChaosAtRates,
} from "./operators.ts";
import {
  type ChaosProfile,
  chaosRow,
  type Driver,
  requestBudget,
  runChaosAtRates,
  SHORT_FAULT_RATE,
  shortProfile,
} from "./scenario.ts";

/**
 * The faulted run may send at most this many times what a fault-free run sends. Looser than the
 * Node host's 3: the test runs the cron every 3 s, and with resync 60 s every run makes its drift
 * lists and sends a drift pass to each object not converged yet (none to a converged one: see the
 * steady-state test in test/e2e/worker.test.ts), so here requests grow with the time to converge,
 * which faults stretch (Proxies: 2.0–3.3× the fault-free run's requests; SubPools and Sites:
 * 1.45–2.72×, on a loaded machine).
 */
const REQUEST_BOUND = 4;
const profile: ChaosProfile = { ...shortProfile, objects: 12 };
const OPERATOR_COUNT = 3;

let admin: Kube;
let faults: FaultProxy;
let harness: TestHarness;
let driver: Driver;
let audit: AuditRelay;
/** Audit events reach the Worker only in the SubPool and Site test (the Proxy test has none). */
let relayTarget: { url: string; auditToken: string } | undefined;
let relayTo: { url: string; auditToken: string } | undefined;
const auditToken = randomBytes(16).toString("hex");
const leftovers: OperatorChaos[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken, auditCollector } = clusterInfo();
  const transport = createFetchTransport({ server: httpProxy, token: adminToken });
  admin = createKube(transport, { fieldManager: "chaos" });
  await installCrdsAndRbac(admin);
  const kubeToken = await serviceAccountToken(transport, "kubefn-system", "kubefn");
  faults = await startFaultProxy(httpProxy);
  const worker = await startChaosWorker({ kubeServer: faults.url, kubeToken, auditToken });
  ({ harness, driver } = worker);
  audit = await startAuditRelay(() => relayTo);
  await audit.pollCollector(auditCollector);
  relayTarget = { url: worker.url, auditToken };
}, 180_000);

afterAll(async () => {
  faults?.configure({ rate: 0 });
  relayTo = relayTarget;
  for (const o of leftovers) await o.cleanup(driver).catch(() => undefined);
  await audit?.close();
  await harness?.close();
  await faults?.close();
}, 180_000);

describe("chaos on the Worker in workerd", () => {
  it("converges with 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    // The namespace is removed before the next test, whose cron runs would drift-poll its Proxies.
    const [faulted] = await runChaosAtRates({ admin, faults, driver, profile, rates: [SHORT_FAULT_RATE] });
    console.log(chaosRow(faulted!, "workerd "));
    expect(faulted!.leaks).toEqual([]);
    expect(faulted!.faulted).toBeGreaterThan(faulted!.requests * 0.1);
    expect(faulted!.requests).toBeLessThanOrEqual(requestBudget("proxy", profile.objects, REQUEST_BOUND));
  }, 300_000);

  it("SubPools and Sites converge with 20 % of API requests faulted and audit events relayed, nothing leaked or doubled, requests within the bound", async () => {
    relayTo = relayTarget;
    const [faulted] = await runOperatorChaosAtRates({
      admin,
      faults,
      driver,
      count: OPERATOR_COUNT,
      rates: [SHORT_FAULT_RATE],
      profile: operatorShortProfile,
      leftovers,
    });
    console.log(operatorChaosRow(faulted!, "workerd "));
    expect(faulted!.leaks).toEqual([]);
    expect(faulted!.faulted).toBeGreaterThan(faulted!.requests * 0.1);
    expect(faulted!.requests).toBeLessThanOrEqual(
      requestBudget("operator", 2 * OPERATOR_COUNT, REQUEST_BOUND),
    );
  }, 300_000);
});
