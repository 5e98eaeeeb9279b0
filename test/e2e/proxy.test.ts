/**
 * The proxy operator through the Node host on the run's devcluster, with real HTTP forward
 * proxies answering at the Pods' loopback IPs: provisioning and health, Secret rotation, quota and
 * permanent errors. The host sweeps every second and probes with a one-second report interval so
 * that thresholds play out in seconds.
 */

import { randomBytes } from "node:crypto";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { ownerTagKey } from "../../shared/controllers/proxy/providers/provider.ts";
import { createKube, findCondition, listAll, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type Condition = { type: string; status: string; reason?: string; message?: string };
type ProxyObject = KubeObject & {
  spec: Record<string, unknown>;
  status?: {
    ip?: string;
    phase?: string;
    providerID?: string;
    latencyMillis?: number;
    conditions?: Condition[];
  };
};

let admin: Kube;
let host: HostProcess;
let target: Target;
let ns: string;

const get = (name: string) => admin.get<ProxyObject>(proxyResource, { namespace: ns, name });
const condition = (p: ProxyObject, type: string) =>
  findCondition(p.status?.conditions as never, type) as Condition | undefined;

function managedProxy(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: ns, name },
    spec: {
      mode: "Managed",
      provider: "kubernetes",
      // Not kubefn's proxy image, so the devcluster runs no proxy in the Pod: the test plays it.
      instance: { image: "registry.example/forward-proxy:test" },
      cloudInit: { inline: "#cloud-config\n" },
      healthCheck: {
        probeURL: `http://127.0.0.1:${target.port}/`,
        intervalSeconds: 5,
        timeoutSeconds: 1,
        successThreshold: 2,
        failureThreshold: 2,
      },
      ...spec,
    },
  };
}

async function podsOf(uid: string, namespace = ns): Promise<KubeObject[]> {
  return listAll(admin, Resources.Pod, { namespace, labelSelector: `${ownerTagKey}=${uid}` });
}

beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfig);
  admin = createKube(createNodeTransport(kc));
  ns = `px-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await optInNamespace(admin, ns);
  target = await startHttpTarget();
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig),
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_PROXY_RESYNC_SECONDS: "60",
    KUBEFN_MIN_REPORT_SECONDS: "1",
    // The Proxy names an image the test plays; the operator allows it.
    PROXY_ALLOWED_IMAGES: "registry.example/forward-proxy:test",
  });
}, 120_000);

afterAll(async () => {
  // The namespaces go while the host runs, so that it takes the Managed Proxies' finalizers off.
  try {
    if (ns) await removeNamespaces(admin, [ns, `${ns}-q`]);
  } finally {
    expect(await host?.stop()).toBe(0);
    await target?.close();
  }
}, 180_000);

describe("a Managed Proxy through the functions", () => {
  it("goes Pending → Provisioning → Ready as its probes pass, Unhealthy when its proxy stops, Ready again", async () => {
    const created = await admin.create<ProxyObject>(proxyResource, managedProxy("health"));
    const phases: string[] = [];
    const seen = (p: ProxyObject) => {
      const phase = p.status?.phase ?? "";
      if (phase && phases.at(-1) !== phase) phases.push(phase);
    };
    const running = await eventually("an IP", async () => {
      const p = await get("health");
      seen(p);
      return p.status?.ip ? p : undefined;
    });
    expect(running.status?.ip).toMatch(/^127\./);
    expect(condition(running, "Provisioned")?.status).toBe("True");

    // The Pod's "container": a real forward proxy at the Pod IP, port 3128.
    let proxy: ForwardProxy = await startForwardProxy({ host: running.status!.ip!, port: 3128 });
    try {
      const ready = await eventually("Ready", async () => {
        const p = await get("health");
        seen(p);
        return p.status?.phase === "Ready" ? p : undefined;
      });
      expect(condition(ready, "Healthy")).toMatchObject({ status: "True", reason: "ProbeSucceeded" });
      expect(ready.status?.latencyMillis).toBeGreaterThanOrEqual(0);
      expect(proxy.requests.length).toBeGreaterThanOrEqual(2);
      // By default the Node host probes through delayed probe-shard messages (each Proxy at its
      // own intervalSeconds and phase), not inside the sweep.
      expect(host.lines.filter((l) => l.msg === "job" && l.task === "probe").length).toBeGreaterThan(0);
      expect(phases[0]).toBe(phases.includes("Pending") ? "Pending" : "Provisioning");
      expect(phases.indexOf("Ready")).toBeGreaterThan(phases.indexOf("Provisioning"));

      await proxy.close();
      const unhealthy = await eventually("Unhealthy", async () => {
        const p = await get("health");
        return p.status?.phase === "Unhealthy" ? p : undefined;
      });
      expect(condition(unhealthy, "Healthy")).toMatchObject({ status: "False", reason: "ProbeFailed" });
      // The flip is an Event on the Proxy, as kubectl describe shows it.
      const events = await listAll<
        KubeObject & { type: string; reason: string; regarding: { name: string } }
      >(admin, Resources.Event, { namespace: ns });
      expect(events.filter((e) => e.regarding.name === "health").map((e) => `${e.type} ${e.reason}`)).toEqual(
        expect.arrayContaining(["Normal InstanceCreated", "Normal Created", "Warning ProbeFailed"]),
      );

      proxy = await startForwardProxy({ host: running.status!.ip!, port: 3128 });
      await eventually("Ready again", async () =>
        (await get("health")).status?.phase === "Ready" ? true : undefined,
      );
    } finally {
      await proxy.close();
    }
    expect(await podsOf(created.metadata.uid!)).toHaveLength(1);
  });

  it("rotating its cloud-init Secret replaces the Pod", async () => {
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: ns, name: "ci" },
      stringData: { "user-data": "#cloud-config\npackages: [squid]\n" },
    });
    const created = await admin.create<ProxyObject>(
      proxyResource,
      managedProxy("rotate", { cloudInit: { secretRef: { name: "ci" } } }),
    );
    await eventually("provisioned", async () => {
      const p = await get("rotate");
      return condition(p, "Provisioned")?.status === "True" ? p : undefined;
    });
    // The instance name derives from the Proxy's UID, so the replacement is a new Pod of the same
    // name: tell them apart by the Pod's own UID.
    const [firstPod] = await podsOf(created.metadata.uid!);
    expect(firstPod).toBeDefined();
    const secret = await admin.get(Resources.Secret, { namespace: ns, name: "ci" });
    await admin.update(Resources.Secret, {
      ...secret,
      data: undefined,
      stringData: { "user-data": "#cloud-config\npackages: [squid, curl]\n" },
    } as KubeObject);
    const second = await eventually("a new instance", async () => {
      const p = await get("rotate");
      const pods = await podsOf(created.metadata.uid!);
      return pods.length === 1 &&
        pods[0]!.metadata.uid !== firstPod!.metadata.uid &&
        condition(p, "Provisioned")?.status === "True"
        ? p
        : undefined;
    });
    expect(second.status?.ip).toMatch(/^127\./);
    await eventually("only the new Pod left", async () =>
      (await podsOf(created.metadata.uid!)).length === 1 ? true : undefined,
    );
  });

  it("an External Proxy needs no provider call: no Pod, no finalizer", async () => {
    const before = (await listAll(admin, Resources.Pod, { namespace: ns })).length;
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: "ext" },
      spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" } },
    });
    const p = await eventually("provisioned", async () => {
      const got = await get("ext");
      return condition(got, "Provisioned")?.status === "True" ? got : undefined;
    });
    expect(condition(p, "Provisioned")?.reason).toBe("ExternalEndpoint");
    expect(p.metadata.finalizers ?? []).toEqual([]);
    expect((await listAll(admin, Resources.Pod, { namespace: ns })).length).toBe(before);
  });

  it("a quota refusal shows QuotaExceeded and is retried until the quota allows it", async () => {
    const qns = `${ns}-q`;
    await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: qns } });
    await optInNamespace(admin, qns);
    await admin.create(Resources.ResourceQuota, {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { namespace: qns, name: "none" },
      spec: { hard: { pods: "0" } },
    });
    // The devcluster's resourcequota controller publishes the usage; until then quota admission
    // refuses everything in the namespace anyway.
    await eventually("quota status", async () => {
      const q = await admin.get<KubeObject & { status?: { hard?: object } }>(Resources.ResourceQuota, {
        namespace: qns,
        name: "none",
      });
      return q.status?.hard ? true : undefined;
    });
    await admin.create(proxyResource, {
      ...managedProxy("quota"),
      metadata: { namespace: qns, name: "quota" },
    });
    const refused = await eventually("QuotaExceeded", async () => {
      const p = await admin.get<ProxyObject>(proxyResource, { namespace: qns, name: "quota" });
      return condition(p, "QuotaExceeded")?.status === "True" ? p : undefined;
    });
    expect(refused.status?.phase).not.toBe("Failed");
    await admin.delete(Resources.ResourceQuota, { namespace: qns, name: "none" });
    const p = await eventually("provisioned after the quota went", async () => {
      const got = await admin.get<ProxyObject>(proxyResource, { namespace: qns, name: "quota" });
      return condition(got, "Provisioned")?.status === "True" ? got : undefined;
    });
    expect(condition(p, "QuotaExceeded")?.status ?? "False").toBe("False");
  });

  it("a permanent error latches Failed until the spec is edited", async () => {
    // No provider of that name: a permanent error (seed §3), latched at this generation.
    await admin.create(proxyResource, managedProxy("bad", { provider: "nope" }));
    const failed = await eventually("Failed", async () => {
      const p = await get("bad");
      return p.status?.phase === "Failed" ? p : undefined;
    });
    expect(condition(failed, "PermanentError")?.status).toBe("True");
    // Latched: later sweeps at the same generation leave the object alone.
    const rv = failed.metadata.resourceVersion;
    await new Promise((r) => setTimeout(r, 3000));
    expect((await get("bad")).metadata.resourceVersion).toBe(rv);

    await admin.patch(
      proxyResource,
      { namespace: ns, name: "bad" },
      {
        type: "merge",
        body: { spec: { provider: "kubernetes" } },
      },
    );
    await eventually("provisioned after the edit", async () => {
      const p = await get("bad");
      return condition(p, "Provisioned")?.status === "True" && p.status?.phase !== "Failed" ? p : undefined;
    });
  });
});
