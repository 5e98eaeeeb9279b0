/**
 * `npm run bench -- chaos`: the chaos scenario (test/chaos/scenario.ts), full profile — 1,000
 * Managed Proxies created, a third updated, a third deleted — on the Node host with 0 % and 20 %
 * of its API requests faulted, side by side: requests sent, passes, time to converge, leaks
 * found. Then SubPools and Sites (test/chaos/operators.ts; 50 of each, `KUBEFN_CHAOS_OPERATOR_OBJECTS`)
 * the same way, at 0 % and 20 %. Then a 20 s outage (every request answered 503) with the circuit
 * on and off: requests sent during the outage and time to recover. `KUBEFN_CHAOS_OBJECTS` changes
 * the Proxy count.
 */

import { randomBytes } from "node:crypto";
import { startDevcluster } from "../../functions/node/devcluster.ts";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { createKube, isNotFound, type Kube, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import {
  chaosHostEnv,
  serviceAccountKubeconfigVia,
  startAuditRelay,
  startChaosHost,
} from "../chaos/drivers.ts";
import {
  type OperatorChaosResult,
  operatorShortProfile,
  runOperatorChaos,
  siteChaos,
  subPoolChaos,
} from "../chaos/operators.ts";
import { fullProfile, runChaos, runOutage } from "../chaos/scenario.ts";
import type { HostProcess } from "../e2e/host.ts";
import { startFaultProxy } from "../support/fault-proxy.ts";
import type { BenchRow } from "./cluster.ts";

export async function benchChaos(): Promise<BenchRow[]> {
  // A devcluster of its own, whose audit webhook reaches the host running now (as in the tests).
  let current: HostProcess | undefined;
  const auditToken = randomBytes(16).toString("hex");
  const relay = await startAuditRelay(() =>
    current && current.child.exitCode === null ? { url: current.url, auditToken } : undefined,
  );
  const devcluster = await startDevcluster({ auditWebhookUrl: relay.url, auditWebhookToken: relay.token });
  const kc = loadKubeConfig({ file: devcluster.info.kubeconfig });
  const cluster = {
    devcluster,
    kubeconfig: devcluster.info.kubeconfig,
    admin: createKube(createNodeTransport(kc), { fieldManager: "kubefn-bench" }),
  };
  await installCrdsAndRbac(cluster.admin);
  const objects = Number(process.env.KUBEFN_CHAOS_OBJECTS ?? fullProfile.objects);
  const profile = { ...fullProfile, objects };
  const faults = await startFaultProxy(cluster.devcluster.info.httpProxy);
  const kubeconfig = await serviceAccountKubeconfigVia(cluster.kubeconfig, faults.url);
  const hostEnv = (extra: Record<string, string> = {}) =>
    chaosHostEnv(kubeconfig, { KUBEFN_AUDIT_TOKEN: auditToken, ...extra });
  const rows: BenchRow[] = [];
  const hosts: HostProcess[] = [];
  try {
    const { host, driver } = await startChaosHost(hostEnv());
    hosts.push(host);
    current = host;
    const results = [];
    for (const rate of [0, 0.2]) {
      const r = await runChaos({
        admin: cluster.admin,
        faults,
        driver,
        profile,
        faultRate: rate,
        log: (l) => process.stderr.write(`  ${l}\n`),
      });
      results.push(r);
      faults.configure({ rate: 0 });
      await removeNamespace(cluster.admin, r.namespace);
    }
    const [clean, faulted] = results as [(typeof results)[0], (typeof results)[0]];
    for (const r of results) {
      const pct = `${Math.round(r.faultRate * 100)}%`;
      rows.push(
        {
          name: `chaos ${pct} requests`,
          figure: r.requests,
          unit: "requests",
          note: `${r.objects} Managed Proxies; ${r.faulted} faulted`,
        },
        { name: `chaos ${pct} passes`, figure: r.passes, unit: "passes", note: "" },
        {
          name: `chaos ${pct} converge`,
          figure: Math.round(r.convergeMs / 100) / 10,
          unit: "s",
          note: "create → all Provisioned → update/delete → converged + quiet",
        },
        {
          name: `chaos ${pct} leaks`,
          figure: r.leaks.length,
          unit: "leaks",
          note: r.leaks.slice(0, 3).join("; "),
        },
      );
    }
    rows.push({
      name: "chaos 20%/0% requests",
      figure: Math.round((faulted.requests / clean.requests) * 100) / 100,
      unit: "ratio",
      note: `passes ${Math.round((faulted.passes / clean.passes) * 100) / 100}×, time ${Math.round((faulted.convergeMs / clean.convergeMs) * 100) / 100}×`,
    });

    const operatorObjects = Number(process.env.KUBEFN_CHAOS_OPERATOR_OBJECTS ?? 50);
    const operatorResults: OperatorChaosResult[] = [];
    for (const rate of [0, 0.2]) {
      const operators = [
        subPoolChaos(cluster.admin, operatorObjects),
        siteChaos(cluster.admin, operatorObjects),
      ];
      operatorResults.push(
        await runOperatorChaos({
          faults,
          driver,
          operators,
          faultRate: rate,
          profile: { ...operatorShortProfile, timeoutMs: 1_200_000, quietMs: 5000 },
          log: (l) => process.stderr.write(`  ${rate * 100}% ${l}\n`),
        }),
      );
      faults.configure({ rate: 0 });
      for (const o of operators) await o.cleanup();
    }
    for (const r of operatorResults) {
      const pct = `${Math.round(r.faultRate * 100)}%`;
      rows.push(
        {
          name: `chaos ${pct} SubPool+Site requests`,
          figure: r.requests,
          unit: "requests",
          note: `${operatorObjects} SubPools + ${operatorObjects} Sites; ${r.faulted} faulted`,
        },
        { name: `chaos ${pct} SubPool+Site passes`, figure: r.passes, unit: "passes", note: "" },
        {
          name: `chaos ${pct} SubPool+Site converge`,
          figure: Math.round(r.convergeMs / 100) / 10,
          unit: "s",
          note: "create → converged → update/delete a third each → converged + quiet",
        },
        {
          name: `chaos ${pct} SubPool+Site leaks`,
          figure: r.leaks.length,
          unit: "leaks",
          note: r.leaks.slice(0, 3).join("; "),
        },
      );
    }
    const [opClean, opFaulted] = operatorResults as [OperatorChaosResult, OperatorChaosResult];
    rows.push({
      name: "chaos SubPool+Site 20%/0% requests",
      figure: Math.round((opFaulted.requests / opClean.requests) * 100) / 100,
      unit: "ratio",
      note: `passes ${Math.round((opFaulted.passes / opClean.passes) * 100) / 100}×, time ${Math.round((opFaulted.convergeMs / opClean.convergeMs) * 100) / 100}×`,
    });
    await host.stop();

    const outageObjects = Math.min(objects, 100);
    for (const circuit of [true, false]) {
      const { host: h, driver: d } = await startChaosHost(
        hostEnv(circuit ? {} : { KUBEFN_CIRCUIT_FAILURES: "1000000000" }),
      );
      hosts.push(h);
      current = h;
      const r = await runOutage({
        admin: cluster.admin,
        faults,
        driver: d,
        objects: outageObjects,
        outageMs: 20_000,
      });
      rows.push({
        name: `outage circuit ${circuit ? "on" : "off"}`,
        figure: r.requestsDuringOutage,
        unit: "requests",
        note: `${outageObjects} Proxies in progress, then a ${Math.round(r.outageMs / 1000)} s all-503 outage; recovered in ${Math.round(r.recoverMs / 100) / 10} s; ${r.leaks.length} leaks`,
      });
      await h.stop();
    }
  } finally {
    for (const h of hosts) await h.stop().catch(() => undefined);
    await faults.close();
    await devcluster.stop();
    await relay.close();
  }
  return rows;
}

/** Deletes a run's namespace and waits until it is gone, so its finalizer passes are not counted in the next run. */
async function removeNamespace(admin: Kube, name: string): Promise<void> {
  await admin.delete(Resources.Namespace, { name });
  const deadline = Date.now() + 900_000;
  while (Date.now() < deadline) {
    const err = await admin.get(Resources.Namespace, { name }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (isNotFound(err)) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`namespace ${name} not gone after 15 min`);
}
