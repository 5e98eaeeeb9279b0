/**
 * Chaos for SubPool and Site on the Node host, short profile: SubPools and Sites created, a third
 * updated and a third deleted, with 20 % of kubefn's API requests faulted; everything converges
 * with nothing leaked or doubled (test/chaos/operators.ts lists the checks), and the run sends at
 * most {@link REQUEST_BOUND}× what a fault-free run sends per object (scenario.ts
 * CLEAN_REQUESTS_PER_OBJECT; `npm run bench -- chaos` runs 0 % and 20 % side by side, with more
 * objects). The API server's audit events reach the host, as its audit webhook would. (Kill at
 * every write: kill-at-write.test.ts.)
 */
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFetchTransport, createKube, type Kube } from "../../shared/kube/index.ts";
import { functionsKubeconfig, type HostProcess } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type AuditRelay, chaosHostEnv, startAuditRelay, startChaosHost } from "./drivers.ts";
import { alive } from "./kill-chain.ts";
import {
  type OperatorChaos,
  operatorChaosRow,
  operatorShortProfile,
  runOperatorChaosAtRates,
} from "./operators.ts";
import { type Driver, requestBudget, SHORT_FAULT_RATE } from "./scenario.ts";

/** The faulted run may send at most this many times what a fault-free run sends. */
const REQUEST_BOUND = 3;
const COUNT = 5;

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
  env = chaosHostEnv(await functionsKubeconfig(kubeconfig, faults.url), {
    KUBEFN_AUDIT_TOKEN: auditToken,
  });
  // The API server's audit webhook, to whichever host runs now.
  audit = await startAuditRelay(() => (alive(host) ? { url: host.url, auditToken } : undefined));
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

async function ensureHost(): Promise<HostProcess> {
  if (!alive(host)) host = (await startChaosHost(env)).host;
  return host!;
}

describe("SubPool and Site chaos on the Node host", () => {
  it("converge with 20 % of API requests faulted, nothing leaked or doubled, requests within the bound", async () => {
    await ensureHost();
    const [faulted] = await runOperatorChaosAtRates({
      admin,
      faults,
      driver,
      count: COUNT,
      rates: [SHORT_FAULT_RATE],
      profile: operatorShortProfile,
      leftovers,
      log: progress,
    });
    console.log(operatorChaosRow(faulted!));
    expect(faulted!.leaks).toEqual([]);
    expect(faulted!.faulted).toBeGreaterThan(faulted!.requests * 0.1);
    expect(faulted!.requests).toBeLessThanOrEqual(requestBudget("operator", 2 * COUNT, REQUEST_BOUND));
  }, 420_000);
});
