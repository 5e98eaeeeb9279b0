/**
 * The crawler API at scale, on the devcluster: a burst of crawler requests (listings and lease
 * choices, from two tenants' namespace tokens) through the routes the platforms mount
 * (`createOperators(...).routes`), counting what reaches the API server with a counting
 * transport. One read of the Proxies serves the instance for a few seconds; the Lease writes
 * still decide who holds what.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { createOperators } from "../../shared/app/operators.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { defaultListingSeconds, namespaceToken } from "../../shared/controllers/proxy/discovery/index.ts";
import { countingTransport } from "../../shared/kube/counting-transport.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Context } from "../../shared/runtime/index.ts";
import { consoleErrors, passContext } from "../support/pass-context.ts";

const suffix = Date.now().toString(36);
const namespaces = [`burst-a-${suffix}`, `burst-b-${suffix}`] as const;
const secret = "burst-api-secret-0123456789";
const transport = countingTransport(createNodeTransport(loadKubeConfig({ file: inject("kubeconfig") })));
let kube: Kube;
let now = new Date();

beforeAll(async () => {
  kube = createKube(transport);
  await installCrdsAndRbac(kube);
  for (const namespace of namespaces) {
    await kube.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace },
    });
    for (let i = 0; i < 3; i++) {
      const name = `p${i}`;
      await kube.create(proxyResource, {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { name, namespace },
        spec: {
          mode: "External",
          endpoint: { host: "203.0.113.7", port: 3128 + i, scheme: "http" },
          healthCheck: { probeURL: "http://probe.example/" },
        },
      });
      await kube.patchStatus(
        proxyResource,
        { namespace, name },
        { type: "merge", body: { status: { phase: "Ready", ip: "203.0.113.7", latencyMillis: 10 + i } } },
      );
    }
  }
}, 120_000);

afterAll(async () => {
  for (const name of namespaces) await kube?.delete(Resources.Namespace, { name }).catch(() => {});
});

describe("the crawler API at scale", () => {
  it("100 crawler requests in a burst cost one list of Proxies per period; every proxy is leased once", async () => {
    const ctx: Context = passContext(kube, {
      // Frozen: the burst falls in one period however slow the machine is.
      clock: { now: () => now },
      log: consoleErrors,
    });
    const operators = createOperators({
      prober: { probe: async () => ({ ok: true, latencyMs: 1 }) },
      sweepPeriodSeconds: 60,
      apiToken: secret,
    });
    const app = operators.routes!(ctx);
    const tokens = await Promise.all(namespaces.map((ns) => namespaceToken(secret, ns)));
    transport.reset();

    const requests = Array.from({ length: 100 }, async (_, i) => {
      const tenant = i % 2;
      const headers = { authorization: `Bearer ${tokens[tenant]}`, "content-type": "application/json" };
      if (i % 4 < 2) {
        const res = await app.request("/v1/proxies", { headers });
        const body = (await res.json()) as { items: { namespace: string }[] };
        return {
          kind: "list" as const,
          tenant,
          status: res.status,
          namespaces: body.items.map((p) => p.namespace),
        };
      }
      const res = await app.request("/v1/leases", {
        method: "POST",
        headers,
        body: JSON.stringify({ holder: `worker-${i}`, ttlSeconds: 60 }),
      });
      const body = (await res.json()) as { lease?: { proxy: { namespace: string; name: string } } };
      return { kind: "lease" as const, tenant, status: res.status, proxy: body.lease?.proxy };
    });
    const answers = await Promise.all(requests);

    const proxyLists = () =>
      transport.calls().filter((c) => c.method === "GET" && /\/proxies(\?|$)/.test(c.path));
    expect(proxyLists()).toHaveLength(1);
    // Lease choices came from the same read: no Lease or Proxy was listed besides it.
    expect(transport.calls().filter((c) => c.method === "GET" && /\/leases(\?|$)/.test(c.path))).toEqual([]);

    // Each tenant saw its own three proxies, never the other's.
    for (const a of answers.filter((a) => a.kind === "list")) {
      expect(a.status).toBe(200);
      expect(a.namespaces).toEqual([namespaces[a.tenant], namespaces[a.tenant], namespaces[a.tenant]]);
    }
    // Leases stay correct: per tenant, its three proxies, each to exactly one holder.
    const leased = answers.filter((a) => a.kind === "lease" && a.status === 201);
    const refused = answers.filter((a) => a.kind === "lease" && a.status !== 201);
    expect(leased).toHaveLength(6);
    expect(refused.every((a) => a.status === 409)).toBe(true);
    const held = leased.map((a) => `${a.proxy?.namespace}/${a.proxy?.name}`);
    expect(new Set(held).size).toBe(6);
    for (const a of leased) expect(a.proxy?.namespace).toBe(namespaces[a.tenant]);
    for (const namespace of namespaces) {
      const stored = await kube.list<KubeObject & { spec?: { holderIdentity?: string } }>(Resources.Lease, {
        namespace,
      });
      const holders = stored.items.map((l) => l.spec?.holderIdentity);
      expect(holders).toHaveLength(3);
      expect(new Set(holders).size).toBe(3);
    }

    // The next period reads once more.
    now = new Date(now.getTime() + (defaultListingSeconds + 1) * 1000);
    await app.request("/v1/proxies", { headers: { authorization: `Bearer ${tokens[0]}` } });
    expect(proxyLists()).toHaveLength(2);
  });
});
