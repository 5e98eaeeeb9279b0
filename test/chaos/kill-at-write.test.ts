/**
 * Kill at every write, for each operator (test/chaos/kill-chain.ts): one victim object is created,
 * updated and deleted while the Node host is SIGKILLed right after each distinct write its passes
 * make — the write reaches the API server, the fault proxy holds the answer, kills the host and
 * drops the connection — and a new host carries on. Each stage must converge with nothing leaked
 * or doubled, and the writes killed at must include every write the operator makes:
 *
 * - a Managed Proxy on the pod provider: finalizer, instance (Pod) and its cloud-init Secret,
 *   spec-hash annotation, status; on a new cloud-init the instance deleted and its replacement
 *   created; on delete the instance deleted and the finalizer removed. Exactly one instance
 *   with the current cloud-init, no orphaned Pod or Secret, no stuck finalizer.
 * - a SubPool: finalizer, Namespace, each of the 8 objects in it, status; the StatefulSet
 *   updated; on delete the Namespace deleted and the finalizer removed. No duplicate Namespace
 *   content, nothing left of a deleted pool (test/chaos/operators.ts).
 * - a Site: its per-Site objects (metalman config and Deployment, storage config), status; a
 *   component switched off deletes its object. Sites have no finalizer: their objects go with
 *   them through ownerReferences (the garbage collector), checked after the delete.
 *
 * The API server's audit events reach whichever host runs, as its audit webhook would.
 */

import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolNamespaceName } from "../../shared/controllers/subpool/api.ts";
import { createFetchTransport, createKube, type Kube, Resources } from "../../shared/kube/index.ts";
import { functionsKubeconfig } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, type SeenRequest, startFaultProxy } from "../support/fault-proxy.ts";
import { type AuditRelay, chaosHostEnv, startAuditRelay } from "./drivers.ts";
import { alive, type KillChain, killChain } from "./kill-chain.ts";
import { type OperatorChaos, siteChaos, subPoolChaos } from "./operators.ts";
import { findProblems } from "./scenario.ts";

let admin: Kube;
let faults: FaultProxy;
let audit: AuditRelay;
let chain: KillChain;
const leftovers: OperatorChaos[] = [];
const namespaces: string[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken, kubeconfig, auditCollector } = clusterInfo();
  admin = createKube(createFetchTransport({ server: httpProxy, token: adminToken }), {
    fieldManager: "chaos",
  });
  faults = await startFaultProxy(httpProxy);
  const auditToken = randomBytes(16).toString("hex");
  const env = chaosHostEnv(await functionsKubeconfig(kubeconfig, faults.url), {
    KUBEFN_AUDIT_TOKEN: auditToken,
  });
  chain = killChain(faults, env, (line) => {
    // Progress, to a file when `KUBEFN_CHAOS_LOG` names one (vitest shows console output only at the end).
    if (process.env.KUBEFN_CHAOS_LOG)
      appendFileSync(process.env.KUBEFN_CHAOS_LOG, `${new Date().toISOString()} ${line}\n`);
  });
  audit = await startAuditRelay(() => {
    const host = chain.host();
    return alive(host) ? { url: host.url, auditToken } : undefined;
  });
  await audit.pollCollector(auditCollector);
}, 180_000);

afterAll(async () => {
  faults?.onForwarded(undefined);
  const host = await chain.ensureHost();
  for (const o of leftovers) await o.cleanup().catch(() => undefined);
  for (const name of namespaces) await admin.delete(Resources.Namespace, { name }).catch(() => undefined);
  chain.close();
  expect(await host.stop()).toBe(0);
  await audit?.close();
  await faults?.close();
}, 300_000);

const anyOf = (labels: string[], pattern: RegExp) => labels.some((l) => pattern.test(l));

describe("kill at every write", () => {
  it("a Managed Proxy: created, its cloud-init changed, deleted — converges after each kill, one instance, nothing leaked", async () => {
    const ns = `kill-${randomBytes(3).toString("hex")}`;
    namespaces.push(ns);
    await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    await optInNamespace(admin, ns);
    const expected = new Map<string, string>();
    const check = async () => {
      const { pending, leaks } = await findProblems(admin, ns, expected);
      return [...leaks, ...pending];
    };
    const isVictims = (r: SeenRequest) =>
      r.path.startsWith(`/apis/crawl.kubefn.dev/v1alpha1/namespaces/${ns}/proxies/victim`) ||
      r.path.startsWith(`/api/v1/namespaces/${ns}/pods`) ||
      r.path.startsWith(`/api/v1/namespaces/${ns}/secrets`);
    const proxyPath = `/apis/crawl.kubefn.dev/v1alpha1/namespaces/${ns}/proxies/victim`;

    const created = await chain.stage({
      isVictims,
      check,
      act: async () => {
        await admin.create(proxyResource, {
          apiVersion: "crawl.kubefn.dev/v1alpha1",
          kind: "Proxy",
          metadata: { name: "victim", namespace: ns },
          spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config v1" } },
        });
        expected.set("victim", "#cloud-config v1");
      },
    });
    const updated = await chain.stage({
      isVictims,
      check,
      act: async () => {
        await admin.patch(
          proxyResource,
          { namespace: ns, name: "victim" },
          { type: "merge", body: { spec: { cloudInit: { inline: "#cloud-config v2" } } } },
        );
        expected.set("victim", "#cloud-config v2");
      },
    });
    const deleted = await chain.stage({
      isVictims,
      check,
      act: async () => {
        await admin.delete(proxyResource, { namespace: ns, name: "victim" });
        expected.delete("victim");
      },
    });
    console.log(JSON.stringify({ created, updated, deleted }, null, 1));
    expect(created).toContain(`PATCH ${proxyPath} (finalizers)`);
    expect(anyOf(created, new RegExp(`^POST /api/v1/namespaces/${ns}/pods `))).toBe(true);
    expect(anyOf(created, new RegExp(`^POST /api/v1/namespaces/${ns}/secrets `))).toBe(true);
    expect(created).toContain(`PATCH ${proxyPath} (annotations)`);
    expect(created).toContain(`PATCH ${proxyPath}/status`);
    expect(anyOf(updated, new RegExp(`^DELETE /api/v1/namespaces/${ns}/pods/`))).toBe(true);
    expect(anyOf(updated, new RegExp(`^POST /api/v1/namespaces/${ns}/pods `))).toBe(true);
    expect(anyOf(deleted, new RegExp(`^DELETE /api/v1/namespaces/${ns}/pods/`))).toBe(true);
    expect(deleted).toContain(`PATCH ${proxyPath} (finalizers)`);
    expect(await check()).toEqual([]);
  }, 420_000);

  it("a SubPool: created, updated, deleted — converges after each kill, nothing leaked or doubled", async () => {
    const pool = subPoolChaos(admin, 1);
    leftovers.push(pool);
    const name = pool.names[0]!;
    const ns = subPoolNamespaceName(name);
    const isVictims = (r: SeenRequest, body: string) =>
      r.path.includes(`/subpools/${name}`) ||
      r.path.includes(`/namespaces/${ns}/`) ||
      r.path.split("?")[0] === `/api/v1/namespaces/${ns}` ||
      (r.method === "POST" && r.path.startsWith("/api/v1/namespaces?") && body.includes(`"${ns}"`));
    const check = pool.problems;
    const created = await chain.stage({ isVictims, check, act: () => pool.create(name) });
    const updated = await chain.stage({ isVictims, check, act: () => pool.update(name) });
    const deleted = await chain.stage({ isVictims, check, act: () => pool.delete(name) });
    console.log(JSON.stringify({ created, updated, deleted }, null, 1));
    const poolPath = `/apis/subrelay.example.com/v1alpha1/subpools/${name}`;
    expect(anyOf(created, new RegExp(`^PATCH ${poolPath} \\(finalizers`))).toBe(true);
    expect(created).toContain(`POST /api/v1/namespaces ${ns}`);
    for (const object of [
      `secrets ${name}-credentials`,
      `serviceaccounts ${name}`,
      `configmaps ${name}-config`,
      `resourcequotas ${name}-quota`,
      `networkpolicies ${name}`,
      `services ${name}-cpa`,
      `statefulsets ${name}-cpa-manager`,
      `poddisruptionbudgets ${name}`,
    ])
      expect(created.join("\n")).toContain(`/namespaces/${ns}/${object}`);
    expect(created).toContain(`PATCH ${poolPath}/status`);
    expect(anyOf(updated, /statefulsets\/.*-cpa-manager$/)).toBe(true);
    expect(deleted).toContain(`DELETE /api/v1/namespaces/${ns}`);
    expect(anyOf(deleted, new RegExp(`^PATCH ${poolPath} \\(finalizers`))).toBe(true);
    expect(await check()).toEqual([]);
  }, 420_000);

  it("a Site: created, a component switched off, deleted — converges after each kill, nothing leaked or doubled", async () => {
    const site = siteChaos(admin, 1);
    leftovers.push(site);
    const name = site.names[0]!;
    const isVictims = (r: SeenRequest, body: string) =>
      r.path.includes(`/sites/${name}`) ||
      r.path.includes(`metalman-${name}`) ||
      r.path.includes(`storage-${name}`) ||
      (r.method === "POST" && (body.includes(`"metalman-${name}"`) || body.includes(`"storage-${name}"`)));
    const check = site.problems;
    const created = await chain.stage({ isVictims, check, act: () => site.create(name) });
    const updated = await chain.stage({ isVictims, check, act: () => site.update(name) });
    // No pass writes on delete: the garbage collector removes the per-Site objects.
    const deleted = await chain.stage({ isVictims, check, act: () => site.delete(name) });
    console.log(JSON.stringify({ created, updated, deleted }, null, 1));
    const all = created.join("\n");
    expect(all).toContain(`configmaps/metalman-${name}`);
    expect(all).toContain(`deployments/metalman-${name}`);
    expect(all).toContain(`configmaps/storage-${name}`);
    expect(created).toContain(`PATCH /apis/unbounded-cloud.io/v1alpha3/sites/${name}/status`);
    expect(anyOf(updated, new RegExp(`^DELETE .*/configmaps/storage-${name}$`))).toBe(true);
    expect(await check()).toEqual([]);
  }, 300_000);
});
