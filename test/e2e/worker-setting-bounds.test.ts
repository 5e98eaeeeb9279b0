/**
 * The Worker in workerd (wrangler's test harness) with every ranged setting at the top of its
 * range at once (the table generated from the schema, shared/app/setting-ranges.ts), against the
 * real devcluster: it answers `/healthz`, its cron run succeeds, and each operator serves — a
 * SubPool and an External Proxy get a Ready their passes wrote, neither "stopped". The same at
 * every bound, one setting at a time, on all three platforms in process:
 * test/unit/setting-bounds.test.ts.
 *
 * Regression: `SUBPOOL_RECHECK_SECONDS=3600` (documented) made every fetch, queue batch and cron
 * run of the Worker fail at start.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { settingsVariables } from "../../shared/app/index.ts";
import { signBatch } from "../../shared/app/intake/index.ts";
import { settingRanges } from "../../shared/app/setting-ranges.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import type { Kube, KubeObject, Resource } from "../../shared/kube/index.ts";
import { eventually } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { workerCluster } from "../support/worker-cluster.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = `bounds-e2e-${Math.random().toString(36).slice(2, 8)}`;
const pool = namespace;
const relaySecret = crypto.randomUUID();

/** A signed relay batch announcing `objects` (ADDED), as the relay posts it. */
async function relay(objects: { resource: Resource; object: KubeObject }[]) {
  const body = JSON.stringify({
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: objects.map(({ resource, object }) => ({
      type: "ADDED",
      resource: { group: resource.group, version: resource.version, resource: resource.resource },
      object,
    })),
  });
  return harness.fetch("/v1/events", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(await signBatch(relaySecret, body, Date.now() / 1000)),
    },
    body,
  });
}

/** The Worker's own JSON log lines at error level (telemetry.ts), for a failure's message. */
function workerErrors(): string[] {
  return harness
    .getLogs()
    .map((l) => l.message)
    .filter((m) => m.includes('"level":"error"'));
}

/** Every ranged setting at its maximum (a far value where the schema sets none). */
const extremes: Record<string, string> = Object.fromEntries(
  Object.entries(settingRanges(settingsVariables)).map(([name, range]) => [
    name,
    String(range.max ?? 1_000_000),
  ]),
);

let kube: Kube;
let harness: TestHarness;

const tick = () => harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
const readyOf = (o: KubeObject | undefined) =>
  (o?.status as { conditions?: { type: string; reason?: string }[] } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  )?.reason;

beforeAll(async () => {
  const { httpProxy, workerToken, kube: admin } = await workerCluster(namespace);
  kube = admin;
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        vars: { KUBE_SERVER: httpProxy, ...extremes },
        secrets: { KUBE_TOKEN: workerToken, RELAY_SECRET: relaySecret },
      },
    ],
  });
  await harness.listen();
}, 180_000);

afterAll(async () => {
  try {
    if (kube && harness) {
      // The test's own teardown: with a sweep period of an hour this Worker would take its time.
      await kube.delete(subPoolResource, { name: pool }).catch(() => {});
      await kube
        .patch(subPoolResource, { name: pool }, { type: "merge", body: { metadata: { finalizers: null } } })
        .catch(() => {});
      await removeNamespaces(kube, [namespace, subPoolNamespaceName(pool)], { tick, dropFinalizers: true });
    }
  } finally {
    await harness?.close();
  }
}, 180_000);

describe("the Worker in workerd with every ranged setting at its maximum", () => {
  it("starts, answers /healthz, and each operator serves (SUBPOOL_RECHECK_SECONDS=3600 among them)", async () => {
    expect(extremes.SUBPOOL_RECHECK_SECONDS).toBe("3600");
    expect((await harness.fetch("/healthz")).status).toBe(200);
    const created = await kube.create(subPoolResource, {
      apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
      kind: "SubPool",
      metadata: { name: pool },
      spec: {
        exposure: { mode: "Internal" },
        storage: { size: "1Gi" },
        suspend: true,
        cpa: {
          image: "ghcr.io/subrelay/cpa:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
        cpaManager: {
          image: "ghcr.io/subrelay/cpa-manager:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
      },
    });
    const proxy = await kube.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "bounds", namespace },
      spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" } },
    });
    // The intake takes their events (the relay's), the queue runs their passes, and the cron runs.
    const posted = await relay([
      { resource: subPoolResource, object: created },
      { resource: proxyResource, object: proxy },
    ]);
    expect(posted.status).toBe(202);
    expect((await tick()).outcome).toBe("ok");
    const reasons = await eventually(
      async () => {
        const subPool = readyOf(await kube.get(subPoolResource, { name: pool }));
        const proxy = readyOf(await kube.get(proxyResource, { namespace, name: "bounds" }));
        return subPool && proxy ? { subPool, proxy } : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: "the SubPool's and the Proxy's Ready" },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; the Worker's errors: ${workerErrors().join("\n")}`);
    });
    expect(["InvalidOperatorConfig", "OperatorNotStarted"]).not.toContain(reasons.subPool);
    expect(["InvalidOperatorConfig", "OperatorNotStarted"]).not.toContain(reasons.proxy);
  }, 180_000);
});
