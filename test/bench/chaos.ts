/**
 * `npm run bench -- chaos`: the full profile of every chaos test in `npm test` (test/chaos/, where
 * each runs a short profile: one run at 20 %, its requests held to a per-object budget), each at
 * 0 % and 20 % of kubefn's API requests faulted, side by side — requests sent, passes, time to
 * converge, leaks found — through the same scenario code as the tests:
 *
 * - `node`: Managed Proxies (test/chaos/scenario.ts, full profile: 1,000, a third updated, a third
 *   deleted; `KUBEFN_CHAOS_OBJECTS`) on the Node host (node-host.test.ts);
 * - `operators`: SubPools and Sites (test/chaos/operators.ts; 50 of each,
 *   `KUBEFN_CHAOS_OPERATOR_OBJECTS`) on the Node host (operators.test.ts);
 * - `outage`: a 20 s outage (every request answered 503) with the circuit on and off: requests
 *   sent during the outage and time to recover (node-host.test.ts, 8 s and 10 Proxies there);
 * - `worker`: Managed Proxies (15, `KUBEFN_CHAOS_WORKER_OBJECTS`) with no events, then SubPools
 *   and Sites (3 of each, `KUBEFN_CHAOS_WORKER_OPERATOR_OBJECTS`) with audit events relayed, on the
 *   Worker in workerd, its cron run every 3 s (worker.test.ts).
 *
 * `KUBEFN_CHAOS_PARTS=node,worker` runs only those parts (default: all, in the order above).
 * Kill at every write (kill-at-write.test.ts) and the queue faults run whole in `npm test`.
 */

import { randomBytes } from "node:crypto";
import { startDevcluster } from "../../functions/node/dev/devcluster.ts";
import { installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { chaosHostEnv, startAuditRelay, startChaosHost, startChaosWorker } from "../chaos/drivers.ts";
import {
  type OperatorChaosResult,
  operatorChaosRow,
  operatorFullProfile,
  runOperatorChaosAtRates,
} from "../chaos/operators.ts";
import {
  type ChaosResult,
  chaosRow,
  type Driver,
  FULL_FAULT_RATES,
  fullProfile,
  runChaosAtRates,
  runOutage,
} from "../chaos/scenario.ts";
import { functionsKubeconfig, type HostProcess } from "../e2e/host.ts";
import { startFaultProxy } from "../support/fault-proxy.ts";
import type { BenchRow } from "./cluster.ts";

const parts = ["node", "operators", "outage", "worker"] as const;

export async function benchChaos(): Promise<BenchRow[]> {
  const only = (process.env.KUBEFN_CHAOS_PARTS ?? parts.join(",")).split(",").filter(Boolean);
  const unknown = only.filter((p) => !(parts as readonly string[]).includes(p));
  if (unknown.length > 0)
    throw new Error(`unknown chaos part ${unknown.join(", ")}; known: ${parts.join(", ")}`);
  const count = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
  const log = (line: string) => process.stderr.write(`  ${line}\n`);

  // A devcluster of its own, whose audit webhook reaches kubefn running now (as in the tests).
  let target: { url: string; auditToken: string } | undefined;
  const auditToken = randomBytes(16).toString("hex");
  const relay = await startAuditRelay(() => target);
  const devcluster = await startDevcluster({ auditWebhookUrl: relay.url, auditWebhookToken: relay.token });
  const kc = loadKubeConfig({ file: devcluster.info.kubeconfig });
  const admin = createKube(createNodeTransport(kc), { fieldManager: "kubefn-bench" });
  await installCrdsAndRbac(admin);
  const faults = await startFaultProxy(devcluster.info.httpProxy);
  const kubeconfig = await functionsKubeconfig(devcluster.info.kubeconfig, faults.url);
  const hostEnv = (extra: Record<string, string> = {}) =>
    chaosHostEnv(kubeconfig, { KUBEFN_AUDIT_TOKEN: auditToken, ...extra });
  const rows: BenchRow[] = [];
  const hosts: HostProcess[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  const startHost = async (extra: Record<string, string> = {}) => {
    const started = await startChaosHost(hostEnv(extra));
    hosts.push(started.host);
    target = { url: started.host.url, auditToken };
    return started;
  };
  try {
    let nodeHost: { host: HostProcess; driver: Driver } | undefined;
    if (only.includes("node")) {
      nodeHost ??= await startHost();
      const objects = count("KUBEFN_CHAOS_OBJECTS", fullProfile.objects);
      const results = await runChaosAtRates({
        admin,
        faults,
        driver: nodeHost.driver,
        profile: { ...fullProfile, objects },
        rates: FULL_FAULT_RATES,
        log,
        removeTimeoutMs: 900_000,
      });
      rows.push(...proxyRows(results, "", `${objects} Managed Proxies on the Node host`));
    }
    if (only.includes("operators")) {
      nodeHost ??= await startHost();
      const objects = count("KUBEFN_CHAOS_OPERATOR_OBJECTS", 50);
      const results = await runOperatorChaosAtRates({
        admin,
        faults,
        driver: nodeHost.driver,
        count: objects,
        rates: FULL_FAULT_RATES,
        profile: operatorFullProfile,
        log,
      });
      rows.push(...operatorRows(results, "", `${objects} SubPools + ${objects} Sites on the Node host`));
    }
    await nodeHost?.host.stop();
    target = undefined;

    if (only.includes("outage")) {
      const outageObjects = Math.min(count("KUBEFN_CHAOS_OBJECTS", fullProfile.objects), 100);
      for (const circuit of [true, false]) {
        const { host, driver } = await startHost(circuit ? {} : { KUBEFN_CIRCUIT_FAILURES: "1000000000" });
        const r = await runOutage({ admin, faults, driver, objects: outageObjects, outageMs: 20_000 });
        rows.push({
          name: `outage circuit ${circuit ? "on" : "off"}`,
          figure: r.requestsDuringOutage,
          unit: "requests",
          note: `${outageObjects} Proxies in progress, then a ${Math.round(r.outageMs / 1000)} s all-503 outage; recovered in ${Math.round(r.recoverMs / 100) / 10} s; ${r.leaks.length} leaks`,
        });
        await host.stop();
        target = undefined;
      }
    }

    if (only.includes("worker")) {
      const kubeToken = await serviceAccountToken(createNodeTransport(kc), "kubefn-system", "kubefn");
      const worker = await startChaosWorker({ kubeServer: faults.url, kubeToken, auditToken });
      closers.push(() => worker.harness.close());
      // No events for the Proxies: the cron sweep and the follow-ups alone converge them.
      const objects = count("KUBEFN_CHAOS_WORKER_OBJECTS", 15);
      const proxies = await runChaosAtRates({
        admin,
        faults,
        driver: worker.driver,
        profile: { ...fullProfile, objects },
        rates: FULL_FAULT_RATES,
        log,
        removeTimeoutMs: 900_000,
      });
      rows.push(
        ...proxyRows(proxies, "workerd ", `${objects} Managed Proxies on the Worker, cron every 3 s`),
      );
      target = { url: worker.url, auditToken };
      const operatorObjects = count("KUBEFN_CHAOS_WORKER_OPERATOR_OBJECTS", 3);
      const operators = await runOperatorChaosAtRates({
        admin,
        faults,
        driver: worker.driver,
        count: operatorObjects,
        rates: FULL_FAULT_RATES,
        profile: operatorFullProfile,
        log,
      });
      rows.push(
        ...operatorRows(
          operators,
          "workerd ",
          `${operatorObjects} SubPools + ${operatorObjects} Sites on the Worker, audit events relayed`,
        ),
      );
      target = undefined;
    }
  } finally {
    for (const h of hosts) await h.stop().catch(() => undefined);
    for (const close of closers) await close().catch(() => undefined);
    await faults.close();
    await devcluster.stop();
    await relay.close();
  }
  return rows;
}

const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;

function proxyRows(results: ChaosResult[], platform: string, what: string): BenchRow[] {
  for (const r of results) process.stderr.write(`  ${chaosRow(r, platform)}\n`);
  return sideBySide(
    results,
    `chaos ${platform}`,
    what,
    "create → all Provisioned → update/delete → converged + quiet",
  );
}

function operatorRows(results: OperatorChaosResult[], platform: string, what: string): BenchRow[] {
  for (const r of results) process.stderr.write(`  ${operatorChaosRow(r, platform)}\n`);
  return sideBySide(
    results,
    `chaos ${platform}SubPool+Site `,
    what,
    "create → converged → update/delete a third each → converged + quiet",
  );
}

/** Four rows per run (requests, passes, time, leaks) and the faulted/fault-free ratio. */
function sideBySide(
  results: Array<ChaosResult | OperatorChaosResult>,
  prefix: string,
  what: string,
  converge: string,
): BenchRow[] {
  const rows: BenchRow[] = [];
  for (const r of results) {
    const pct = `${Math.round(r.faultRate * 100)}%`;
    rows.push(
      {
        name: `${prefix}${pct} requests`,
        figure: r.requests,
        unit: "requests",
        note: `${what}; ${r.faulted} faulted`,
      },
      { name: `${prefix}${pct} passes`, figure: r.passes, unit: "passes", note: "" },
      {
        name: `${prefix}${pct} converge`,
        figure: Math.round(r.convergeMs / 100) / 10,
        unit: "s",
        note: converge,
      },
      {
        name: `${prefix}${pct} leaks`,
        figure: r.leaks.length,
        unit: "leaks",
        note: r.leaks.slice(0, 3).join("; "),
      },
    );
  }
  const [clean, faulted] = results;
  if (clean && faulted)
    rows.push({
      name: `${prefix}20%/0% requests`,
      figure: ratio(faulted.requests, clean.requests),
      unit: "ratio",
      note: `passes ${ratio(faulted.passes, clean.passes)}×, time ${ratio(faulted.convergeMs, clean.convergeMs)}×`,
    });
  return rows;
}
