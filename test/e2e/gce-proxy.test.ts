/**
 * A `provider: gce` Proxy through the Node host, the GCE provider wired from the shared settings
 * (GCE_PROJECT, GCE_ZONES, GCE_CREDENTIALS, GCE_NETWORK, GCE_COMPUTE_URL), against a local GCE-shaped server
 * that checks the service-account JWT and the bearer token on every call: the VM is inserted,
 * polled to RUNNING, and on deletion the finalizer is held until the VM is gone.
 */

import { randomBytes } from "node:crypto";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, findCondition, isNotFound, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { auditEventsSince, clusterInfo, waitForAuditEvent } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { type GceServer, startGceServer } from "./gce-server.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type ProxyObject = KubeObject & {
  status?: {
    phase?: string;
    ip?: string;
    providerID?: string;
    conditions?: { type: string; status: string; reason?: string }[];
  };
};

const project = "kubefn-e2e";
const auditToken = randomBytes(16).toString("hex");
let admin: Kube;
let host: HostProcess;
let gce: GceServer;
let ns: string;

const get = (name: string) => admin.get<ProxyObject>(proxyResource, { namespace: ns, name });

beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfig);
  admin = createKube(createNodeTransport(kc));
  ns = `gce-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await optInNamespace(admin, ns);
  gce = await startGceServer(project);
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig),
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_AUDIT_TOKEN: auditToken,
    GCE_PROJECT: project,
    GCE_ZONES: "europe-west1-b,europe-west1-c",
    GCE_CREDENTIALS: gce.credentials,
    GCE_NETWORK: "crawl-proxies",
    GCE_COMPUTE_URL: `${gce.url}/compute/v1`,
  });
}, 120_000);

afterAll(async () => {
  // The namespace goes while the host runs, so that it takes the finalizer off a Proxy a failed
  // test left behind.
  try {
    if (ns) await removeNamespaces(admin, [ns]);
  } finally {
    expect(await host?.stop()).toBe(0);
    await gce?.close();
  }
}, 180_000);

/**
 * Hands the host the API server's audit event for `verb` on the Proxy "vm" (seen from `since`), as
 * its audit webhook would: without it, the host's first pass of a Proxy created after its first
 * sweep waits for the next drift decisions (at a 5-minute boundary), past this test's waits.
 */
async function handOver(verb: "create" | "delete", since: number): Promise<void> {
  const event = await waitForAuditEvent(
    (e) =>
      e.stage === "ResponseComplete" &&
      e.verb === verb &&
      e.objectRef?.resource === "proxies" &&
      e.objectRef.namespace === ns &&
      e.objectRef.name === "vm",
    { since },
  );
  const posted = await fetch(`${host.url}/v1/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${auditToken}`, "content-type": "application/json" },
    body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [event] }),
  });
  expect(posted.status).toBe(202);
}

describe("a gce Proxy through the Node host", () => {
  it("is provisioned as a Compute Engine VM through the GCE provider wired from the shared settings", async () => {
    const since = (await auditEventsSince()).next;
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: "vm" },
      spec: { mode: "Managed", provider: "gce", cloudInit: { inline: "#cloud-config\n" } },
    });
    await handOver("create", since);
    const p = await eventually("Ready", async () => {
      const got = await get("vm");
      return got.status?.phase === "Ready" ? got : undefined;
    });
    expect(p.status?.providerID).toMatch(new RegExp(`^gce://${project}/europe-west1-b/px-`));
    expect(p.status?.ip).toBe("127.0.0.1");
    expect(findCondition(p.status?.conditions as never, "Provisioned")).toMatchObject({ status: "True" });
    expect(p.metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
    expect([...gce.instances.values()].map((i) => i.status)).toEqual(["RUNNING"]);
    expect(gce.authFailures).toEqual([]);
    // In the operator's network (not the project's default), with the tag its firewall rules
    // target, its external address kept; no service account; no project-wide SSH keys.
    expect(gce.inserted).toHaveLength(1);
    expect(gce.inserted[0]).toMatchObject({
      networkInterfaces: [
        { network: "global/networks/crawl-proxies", accessConfigs: [{ type: "ONE_TO_ONE_NAT" }] },
      ],
      tags: { items: ["kubefn-proxy"] },
      serviceAccounts: [],
      metadata: { items: expect.arrayContaining([{ key: "block-project-ssh-keys", value: "TRUE" }]) },
    });
  });

  it("deleting it waits for the VM to be gone before the finalizer goes", async () => {
    const since = (await auditEventsSince()).next;
    // The VM takes its time to stop (until released below), whatever the machine's speed.
    gce.holdStopping = true;
    await admin.delete(proxyResource, { namespace: ns, name: "vm" });
    // The API server's audit webhook points at the run's collector; hand the host the real
    // delete event, as the webhook would, instead of waiting for the drift resync.
    await handOver("delete", since);
    const stopping = await eventually("the VM stopping while the Proxy is held", async () => {
      const vm = [...gce.instances.values()][0];
      if (vm?.status !== "STOPPING") return undefined;
      const held = await get("vm");
      return held.metadata.deletionTimestamp ? held : undefined;
    });
    expect(stopping.metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
    // Still held after kubefn has looked again (its follow-ups read the VM while it stops).
    const reads = gce.calls.filter((c) => c.startsWith("GET")).length;
    await eventually("kubefn reading the stopping VM again", async () =>
      gce.calls.filter((c) => c.startsWith("GET")).length > reads ? true : undefined,
    );
    expect((await get("vm")).metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
    gce.holdStopping = false;
    await eventually("the Proxy gone", async () => {
      try {
        await get("vm");
        return undefined;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    });
    expect(gce.instances.size).toBe(0);
    expect(gce.calls.filter((c) => c.startsWith("DELETE"))).not.toEqual([]);
    expect(gce.authFailures).toEqual([]);
  });
});
