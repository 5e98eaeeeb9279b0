/**
 * kubefn's Worker in workerd (wrangler's test harness) with the optional STATE_CHANGES queue bound
 * (test/e2e/state-changes-standin/: the root Worker beside a stand-in for the user's consumer of
 * that queue), against the real devcluster: two External Proxies probed through a loopback forward
 * proxy, one to a target that answers 200, one to a target that answers 500. The Worker's passes
 * publish `Proxy Ready` for the first and `Proxy Unhealthy` for the second, each once, in the
 * schema EventBridge's events have (`source`, `detail-type`, the versioned `detail`); a further
 * cron run, changing nothing, publishes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import type { StateChangeMessage } from "../../functions/cloudflare/index.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import type { Kube, KubeObject } from "../../shared/kube/index.ts";
import { eventually } from "../setup/cluster.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { workerCluster } from "../support/worker-cluster.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = `worker-changes-${Math.random().toString(36).slice(2, 8)}`;

type Proxy = ProxyObject & KubeObject;

let kube: Kube;
let harness: TestHarness;
let forwardProxy: ForwardProxy;
let up: Target;
let down: Target;

beforeAll(async () => {
  const { httpProxy, workerToken, kube: admin } = await workerCluster(namespace);
  kube = admin;
  [forwardProxy, up, down] = await Promise.all([
    startForwardProxy(),
    startHttpTarget(),
    startHttpTarget({ status: 500 }),
  ]);
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "test/e2e/state-changes-standin/wrangler.toml",
        vars: {
          KUBE_SERVER: httpProxy,
          PROXY_RESYNC_SECONDS: "60",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
        },
        secrets: { KUBE_TOKEN: workerToken },
      },
    ],
  });
  await harness.listen();
}, 180_000);

afterAll(async () => {
  try {
    // External Proxies carry no finalizer: they go with their namespace.
    if (kube) await removeNamespaces(kube, [namespace], { dropFinalizers: true });
  } finally {
    await harness?.close();
    await Promise.all([forwardProxy?.close(), up?.close(), down?.close()]);
  }
}, 180_000);

function probedProxy(name: string, target: Target): Proxy {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
      healthCheck: {
        probeURL: `http://127.0.0.1:${target.port}/`,
        expectedStatus: 200,
        intervalSeconds: 5,
        timeoutSeconds: 2,
        successThreshold: 1,
        failureThreshold: 1,
      },
    },
  } as Proxy;
}

/** The state changes the stand-in consumer received so far. */
function received(): StateChangeMessage[] {
  return harness.getLogs().flatMap((l) => {
    try {
      const line = JSON.parse(l.message) as { msg?: string; body?: StateChangeMessage };
      return line.msg === "state change received" && line.body ? [line.body] : [];
    } catch {
      return [];
    }
  });
}

const tick = () => harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
const aboutProxy = (name: string) => (m: StateChangeMessage) =>
  m.detail.object?.kind === "Proxy" &&
  m.detail.object.namespace === namespace &&
  m.detail.object.name === name;

describe("Workers: state changes on the bound STATE_CHANGES queue", () => {
  it("a Proxy going Ready and one going Unhealthy each publish once; a run changing nothing publishes nothing", async () => {
    await kube.create<Proxy>(proxyResource, probedProxy("px-up", up));
    await kube.create<Proxy>(proxyResource, probedProxy("px-down", down));

    const [ready, unhealthy] = await eventually(
      async () => {
        await tick();
        const got = received();
        const r = got.find((m) => m["detail-type"] === "Proxy Ready" && aboutProxy("px-up")(m));
        const u = got.find((m) => m["detail-type"] === "Proxy Unhealthy" && aboutProxy("px-down")(m));
        return r && u ? ([r, u] as const) : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 2_000, what: "Proxy Ready and Proxy Unhealthy on STATE_CHANGES" },
    );
    expect(ready).toMatchObject({
      source: "kubefn",
      detail: { version: "1", condition: { type: "Ready", status: "True" } },
    });
    expect(unhealthy).toMatchObject({
      source: "kubefn",
      detail: { version: "1", condition: { type: "Healthy", status: "False" } },
    });
    const px = await kube.get<Proxy>(proxyResource, { namespace, name: "px-up" });
    expect(ready.detail.object?.uid).toBe(px.metadata.uid);

    // Both verdicts hold: further runs (probes taken again) change no condition, publish nothing.
    const before = received().filter((m) => aboutProxy("px-up")(m) || aboutProxy("px-down")(m));
    for (let i = 0; i < 3; i++) {
      await tick();
      await new Promise((r) => setTimeout(r, 2_000));
    }
    const after = received().filter((m) => aboutProxy("px-up")(m) || aboutProxy("px-down")(m));
    expect(after.map((m) => m["detail-type"])).toEqual(before.map((m) => m["detail-type"]));
    expect(
      after.filter((m) => m["detail-type"] === "Proxy Ready" || m["detail-type"] === "Proxy Unhealthy"),
    ).toHaveLength(2);
  }, 150_000);
});
