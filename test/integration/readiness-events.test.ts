/**
 * Issue 33: readiness of what an operator owns arrives as an event. The Node host runs as kubefn's
 * ServiceAccount with sweeps an hour apart, fed by the API server's audit webhook (the devcluster
 * posts to a collector with this checkout's audit policy; a relay forwards to the host): a pool
 * that is Ready sends no follow-up and the sweep does not come, so only intake can bring the pass
 * that sees its StatefulSet lose its ready replica, or a Site's metalman Deployment its
 * availability. Readiness is taken from a Pod as the kubelet reports it (its Ready condition
 * patched on the status subresource); the workload controllers write the StatefulSet's and the
 * Deployment's status from it, and that status write is the event.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { endpointSliceResource } from "../../shared/controllers/subpool/desired.ts";
import { isNotFound, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { type AuditRelay, startAuditRelay } from "../chaos/drivers.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { adminKube } from "../security/tenants.ts";
import { clusterInfo } from "../setup/cluster.ts";

const suffix = randomBytes(3).toString("hex");
const gatewayNs = `re-gw-${suffix}`;
const pool = `re-${suffix}`;
const site = `re-${suffix}`;
const auditToken = randomBytes(16).toString("hex");

type Conditioned = KubeObject & {
  status?: { conditions?: { type: string; status: string; reason: string }[] };
};

let admin: Kube;
let host: HostProcess | undefined;
let audit: AuditRelay | undefined;

const condition = (object: Conditioned, type: string) =>
  object.status?.conditions?.find((c) => c.type === type);

/** A Pod's readiness as the kubelet reports it: its Ready and ContainersReady conditions. */
async function setPodReady(namespace: string, name: string, ready: boolean): Promise<void> {
  const pod = await admin.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
    Resources.Pod,
    { namespace, name },
  );
  const now = new Date().toISOString();
  const conditions = (pod.status?.conditions ?? []).map((c) =>
    c.type === "Ready" || c.type === "ContainersReady"
      ? { ...c, status: ready ? "True" : "False", lastTransitionTime: now }
      : c,
  );
  await admin.patchStatus(
    Resources.Pod,
    { namespace, name },
    { type: "merge", body: { status: { conditions } } },
  );
}

/** The passes the host logged for `controller/name`, by trigger. */
const passTriggers = (key: string) =>
  (host?.lines ?? []).filter((l) => l.msg === "pass" && l.key === key).map((l) => String(l.trigger));

beforeAll(async () => {
  admin = adminKube();
  const { kubeconfig, auditCollector } = clusterInfo();
  // The shared proxy gateway this host reads: one ready endpoint, so a pool can be Ready.
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: gatewayNs },
  });
  await admin.create(endpointSliceResource, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "mihomo-1", namespace: gatewayNs, labels: { "kubernetes.io/service-name": "mihomo" } },
    addressType: "IPv4",
    endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true } }],
    ports: [{ name: "http", port: 7890, protocol: "TCP" }],
  });
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(kubeconfig),
    KUBEFN_AUDIT_TOKEN: auditToken,
    KUBEFN_SWEEP_SECONDS: "3600",
    SUBPOOL_PROXY_GATEWAY: `${gatewayNs}/mihomo`,
  });
  audit = await startAuditRelay(() => (host ? { url: host.url, auditToken } : undefined));
  await audit.pollCollector(auditCollector);
}, 240_000);

/** Deletes a primary and waits until it is gone (kubefn, still running, takes its finalizer off). */
async function deleted(res: typeof subPoolResource, name: string): Promise<void> {
  await admin?.delete(res, { name }).catch(() => undefined);
  await eventually(
    `${name} deleted`,
    async () => {
      try {
        await admin.get(res, { name });
        return undefined;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    },
    90_000,
  ).catch(() => undefined);
}

afterAll(async () => {
  await deleted(subPoolResource, pool);
  await deleted(siteResource, site);
  await audit?.close();
  expect(await host?.stop()).toBe(0);
  await admin?.delete(Resources.Namespace, { name: gatewayNs }).catch(() => undefined);
}, 180_000);

describe("readiness of owned objects arrives as an event (issue 33)", () => {
  it("a Ready pool whose StatefulSet loses its ready replica turns Ready=False/StatefulSetNotReady, and back, by its status writes alone", async () => {
    await eventually("the SubPool CRD served", async () =>
      admin
        .create(subPoolResource, {
          apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
          kind: "SubPool",
          metadata: { name: pool },
          spec: {
            exposure: { mode: "Internal" },
            storage: { size: "1Gi" },
            cpa: {
              image: "ghcr.io/subrelay/cpa:1.4.0",
              resources: { requests: { cpu: "100m", memory: "64Mi" } },
            },
            cpaManager: {
              image: "ghcr.io/subrelay/cpa-manager:1.4.0",
              resources: { requests: { cpu: "100m", memory: "64Mi" } },
            },
          },
        })
        .then(() => true),
    );
    await eventually(
      "the pool Ready",
      async () => {
        const p = await admin.get<Conditioned>(subPoolResource, { name: pool });
        return condition(p, "Ready")?.status === "True" ? p : undefined;
      },
      150_000,
    );
    const namespace = subPoolNamespaceName(pool);
    const podName = `${pool}-cpa-manager-0`;
    const key = `subpool//${pool}`;
    const before = passTriggers(key).length;

    await setPodReady(namespace, podName, false);
    const down = await eventually(
      "Ready=False/StatefulSetNotReady",
      async () => {
        const p = await admin.get<Conditioned>(subPoolResource, { name: pool });
        return condition(p, "Ready")?.reason === "StatefulSetNotReady" ? p : undefined;
      },
      30_000,
    );
    expect(condition(down, "Ready")?.status).toBe("False");
    // The pass came from the StatefulSet's status write, as a look at the pool's readiness: no
    // sweep ran (an hour apart), and a Ready pool sends itself no follow-up. Its line follows its
    // status write: waited for, not read at once.
    const triggers = await eventually(
      "the pass's line",
      async () => {
        const seen = passTriggers(key).slice(before);
        return seen.includes("audit:owned-status") ? seen : undefined;
      },
      10_000,
    );
    expect(triggers.filter((t) => t.startsWith("drift") || t === "start")).toEqual([]);

    await setPodReady(namespace, podName, true);
    await eventually(
      "Ready=True again",
      async () => {
        const p = await admin.get<Conditioned>(subPoolResource, { name: pool });
        return condition(p, "Ready")?.status === "True" ? true : undefined;
      },
      60_000,
    );
  }, 300_000);

  it("a Site's metalman Deployment losing its availability turns MetalmanReady False, and back, by its status writes alone", async () => {
    await admin.create(siteResource, {
      apiVersion: "unbounded-cloud.io/v1alpha3",
      kind: "Site",
      metadata: { name: site },
      spec: { displayName: "readiness events" },
    });
    await eventually(
      "the Site Ready",
      async () => {
        const s = await admin.get<Conditioned>(siteResource, { name: site });
        return condition(s, "MetalmanReady")?.status === "True" && condition(s, "Ready")?.status === "True"
          ? s
          : undefined;
      },
      150_000,
    );
    const key = `site//${site}`;
    const before = passTriggers(key).length;
    const pods = await admin.list(Resources.Pod, { namespace: "kubefn-system" });
    const pod = pods.items.find((p) => p.metadata.name?.startsWith(`metalman-${site}-`));
    expect(pod, "metalman's Pod").toBeDefined();

    await setPodReady("kubefn-system", pod!.metadata.name!, false);
    const down = await eventually(
      "MetalmanReady=False",
      async () => {
        const s = await admin.get<Conditioned>(siteResource, { name: site });
        return condition(s, "MetalmanReady")?.status === "False" ? s : undefined;
      },
      30_000,
    );
    expect(condition(down, "MetalmanReady")?.reason).toBe("DeploymentProgressing");
    const triggers = await eventually(
      "the pass's line",
      async () => {
        const seen = passTriggers(key).slice(before);
        return seen.includes("audit:owned-status") ? seen : undefined;
      },
      10_000,
    );
    expect(triggers.filter((t) => t.startsWith("drift") || t === "start")).toEqual([]);

    await setPodReady("kubefn-system", pod!.metadata.name!, true);
    await eventually(
      "MetalmanReady=True again",
      async () => {
        const s = await admin.get<Conditioned>(siteResource, { name: site });
        return condition(s, "MetalmanReady")?.status === "True" ? true : undefined;
      },
      60_000,
    );
  }, 300_000);
});
