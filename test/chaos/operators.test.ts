/**
 * Chaos for SubPool and Site on the Node host, short profile (`npm run bench -- chaos` runs
 * larger counts): SubPools and Sites created, a third updated and a third deleted, with 0 % and
 * then 20 % of kubefn's API requests faulted; both runs converge with nothing leaked or doubled
 * (test/chaos/operators.ts lists the checks), and the faulted run sends at most
 * {@link REQUEST_BOUND}× the requests of the fault-free one. The API server's audit events reach
 * the host, as its audit webhook would. (Kill at every write: kill-at-write.test.ts.)
 */
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFetchTransport, createKube, type Kube } from "../../shared/kube/index.ts";
import type { HostProcess } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import {
  type AuditRelay,
  chaosHostEnv,
  serviceAccountKubeconfigVia,
  startAuditRelay,
  startChaosHost,
} from "./drivers.ts";
import {
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
      // The fault-free run is torn down before the faulted one, so its requests are not counted
      // there; the faulted run's teardown waits for afterAll.
      if (faultRate === 0) for (const o of operators) await o.cleanup();
    }
    const [clean, faulted] = results as [OperatorChaosResult, OperatorChaosResult];
    console.log(`${row(clean)}\n${row(faulted)}`);
    expect(clean.leaks).toEqual([]);
    expect(faulted.leaks).toEqual([]);
    expect(faulted.faulted).toBeGreaterThan(faulted.requests * 0.1);
    expect(faulted.requests).toBeLessThanOrEqual(clean.requests * REQUEST_BOUND);
  }, 420_000);
});
