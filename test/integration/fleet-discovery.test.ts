/**
 * A fleet discovered from Cluster API (issue 35), on the Node host. Four devclusters of this
 * file's own: `hub` is the management cluster (a minimal Cluster CRD, a `fleet` namespace, a
 * discovery identity with only get/list/watch on Clusters and get on the named Secrets) and a
 * declared member; `east` and `west` join the fleet from their `Cluster` objects and kubeconfig
 * Secrets at start; `fourth` joins while the host runs and leaves when its `Cluster` is deleted.
 * Then east's API server is stopped and west's credential revoked while hub keeps converging and
 * probing.
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { capiClusterResource } from "../../functions/node/cluster-api.ts";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import {
  allowListEntriesFor,
  applyAllowLists,
  optInNamespace,
  serviceAccountToken,
} from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { createKube, type Kube, type KubeObject, type Resource, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually, functionsKubeconfig } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
type Name = "hub" | "east" | "west" | "fourth";
const FLEET = "fleet";

const clusters = {} as Record<Name, { devcluster: OwnDevcluster; admin: Kube; token: string }>;
let host: NodeHost | undefined;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
const eastAuditToken = "east-audit-token-0123456789";

const kubectl = async (kubeconfig: string, ...args: string[]) => {
  const out = await outputOf(
    spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", kubeconfig, ...args]),
    "",
  );
  if (out.code !== 0) throw new Error(out.stderr);
};

function proxy(name: string): [Resource, KubeObject] {
  return [
    proxyResource,
    {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: "default", name },
      spec: {
        mode: "External",
        endpoint: { host: "127.0.0.1", port: forwardProxy!.port, scheme: "http" },
        healthCheck: {
          probeURL: `http://127.0.0.1:${target!.port}/`,
          intervalSeconds: 5,
          successThreshold: 1,
          failureThreshold: 1,
        },
      },
    },
  ];
}

function subPool(name: string): [Resource, KubeObject] {
  const [pool] = parseAllDocuments(readFileSync(`${root}examples/subpool-internal.yaml`, "utf8")).map(
    (d) => d.toJS() as KubeObject,
  ) as [KubeObject];
  return [subPoolResource, { ...pool, metadata: { name } }];
}

async function ready(name: Name, [res, o]: [Resource, KubeObject]): Promise<void> {
  const { admin } = clusters[name];
  const { namespace, name: objectName = "" } = o.metadata;
  await eventually(
    `${name}: ${o.kind} ${objectName} Ready`,
    async () => {
      const got = await admin.get(res, { ...(namespace ? { namespace } : {}), name: objectName });
      const conditions = (got.status as { conditions?: { type: string; status: string }[] } | undefined)
        ?.conditions;
      if (conditions?.find((c) => c.type === "Ready")?.status === "True") return true;
      throw new Error(JSON.stringify(conditions ?? got.status ?? null));
    },
    180_000,
  );
}

/** A devcluster with kubefn's CRDs, RBAC and allow-lists, and its kubefn ServiceAccount's token. */
async function startMember(name: Name): Promise<void> {
  const devcluster = await startOwnDevcluster([]);
  const admin = createKube(createNodeTransport(loadKubeConfig({ file: devcluster.kubeconfig })), {
    fieldManager: "fleet-discovery-test",
  });
  clusters[name] = { devcluster, admin, token: "" };
  const file = await functionsKubeconfig(devcluster.kubeconfig);
  await optInNamespace(admin, "default");
  await applyAllowLists(admin, allowListEntriesFor(parseNodeHostEnv({}).settings.operators));
  clusters[name].token = loadKubeConfig({ file }).getCurrentUser()?.token ?? "";
}

/** A kubeconfig of `name` as Cluster API writes one: its server, CA and a token (kubefn's by default). */
function kubeconfigOf(name: Name, token = clusters[name].token): string {
  const { devcluster } = clusters[name];
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name, cluster: { server: devcluster.server, "certificate-authority-data": devcluster.caData } },
    ],
    users: [{ name: `${name}-kubefn`, user: { token } }],
    contexts: [{ name, context: { cluster: name, user: `${name}-kubefn` } }],
    "current-context": name,
  });
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

/**
 * `name`'s Cluster object and Cluster API's kubeconfig Secret in the management cluster,
 * provisioned, and kubefn's own Secret (`<name>-kubefn`) when `own` gives its keys.
 */
async function registerCluster(name: string, kubeconfig: string, own?: Record<string, string>) {
  const { admin } = clusters.hub;
  await admin.create(Resources.Secret, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace: FLEET, name: `${name}-kubeconfig` },
    type: "cluster.x-k8s.io/secret",
    data: { value: b64(kubeconfig) },
  });
  if (own)
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: FLEET, name: `${name}-kubefn` },
      data: Object.fromEntries(Object.entries(own).map(([k, v]) => [k, b64(v)])),
    });
  await admin.create(capiClusterResource, {
    apiVersion: "cluster.x-k8s.io/v1beta1",
    kind: "Cluster",
    metadata: { namespace: FLEET, name },
    spec: {},
    status: { phase: "Provisioned" },
  });
}

/** The host's `/metrics` lines. */
const scrape = async () => (await fetch(`${host!.url}/metrics`).then((r) => r.text())).split("\n");

beforeAll(async () => {
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  await Promise.all((["hub", "east", "west"] as const).map(startMember));
  const hub = clusters.hub;
  await kubectl(hub.devcluster.kubeconfig, "apply", "-f", `${root}examples/subpool-platform.yaml`);
  await kubectl(
    hub.devcluster.kubeconfig,
    "apply",
    "-f",
    `${root}test/fixtures/cluster-api/cluster-crd.yaml`,
  );
  await hub.admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: FLEET },
  });
  // The discovery identity, least-privileged as docs/deploying/clusters.md says: Clusters read and
  // watched, the named Secrets got (never listed), Events written on the Clusters.
  const secretNames = ["east", "west", "fourth", "hub"].flatMap((n) => [`${n}-kubeconfig`, `${n}-kubefn`]);
  const rbac = [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { namespace: FLEET, name: "kubefn-discovery" } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { namespace: FLEET, name: "kubefn-discovery" },
      rules: [
        { apiGroups: ["cluster.x-k8s.io"], resources: ["clusters"], verbs: ["get", "list", "watch"] },
        { apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: secretNames },
        { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { namespace: FLEET, name: "kubefn-discovery" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "kubefn-discovery" },
      subjects: [{ kind: "ServiceAccount", namespace: FLEET, name: "kubefn-discovery" }],
    },
  ];
  for (const [res, o] of [
    [Resources.ServiceAccount, rbac[0]],
    [Resources.Role, rbac[1]],
    [Resources.RoleBinding, rbac[2]],
  ] as [Resource, KubeObject][])
    await hub.admin.create(res, o);
  const discoveryToken = await serviceAccountToken(
    createNodeTransport(loadKubeConfig({ file: hub.devcluster.kubeconfig })),
    FLEET,
    "kubefn-discovery",
  );
  // East as Cluster API leaves it (an admin's kubeconfig), and kubefn's own Secret beside it: its
  // ServiceAccount's kubeconfig and east's audit token. West by Cluster API's Secret alone.
  await registerCluster("east", kubeconfigOf("east", clusters.east.devcluster.adminToken), {
    kubeconfig: kubeconfigOf("east"),
    auditToken: eastAuditToken,
  });
  await registerCluster("west", kubeconfigOf("west"));
  const hubFile = await functionsKubeconfig(hub.devcluster.kubeconfig);
  const config = parseNodeHostEnv({
    KUBEFN_CLUSTERS: JSON.stringify([{ name: "hub", credential: { kind: "kubeconfig", file: hubFile } }]),
    KUBEFN_CLUSTER_API: JSON.stringify({
      server: hub.devcluster.server,
      ca: Buffer.from(hub.devcluster.caData, "base64").toString(),
      credential: { kind: "token", token: discoveryToken },
      namespaces: [FLEET],
      // An hour: every change below reaches the host by the watch alone.
      resyncSeconds: 3600,
    }),
    KUBEFN_PORT: "0",
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_MIN_REPORT_SECONDS: "1",
    KUBEFN_METRICS_PER_OBJECT: "true",
    ADMISSION_RECHECK_SECONDS: "2",
    CIRCUIT_FAILURES: "2",
    CIRCUIT_OPEN_SECONDS: "2",
    KUBE_TIMEOUT_SECONDS: "5",
    PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
  });
  const record = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  host = await startNodeHost(config, { info: record("info"), warn: record("warn"), error: record("error") });
}, 300_000);

afterAll(async () => {
  await host?.stop();
  await Promise.all(Object.values(clusters).map((c) => c.devcluster.close()));
  await Promise.all([forwardProxy?.close(), target?.close()]);
}, 120_000);

describe("a fleet discovered from Cluster API", () => {
  it("the declared cluster and the two discovered at start are reconciled; a clashing name is refused", async () => {
    expect(Object.keys(host!.clusters ?? {}).sort()).toEqual(["east", "hub", "west"]);
    // East as kubefn's ServiceAccount, from kubefn's own Secret, not as Cluster API's admin.
    expect(lines.find((l) => l.msg.startsWith("reconciling as ") && l.fields?.cluster === "east")?.msg).toBe(
      "reconciling as system:serviceaccount:kubefn-system:kubefn",
    );
    for (const name of ["hub", "east", "west"] as const) await clusters[name].admin.create(...proxy("edge"));
    await Promise.all((["hub", "east", "west"] as const).map((name) => ready(name, proxy("edge"))));

    // East's intake credential, from its intake Secret: its audit batches are taken, as east's.
    const res = await fetch(`${host!.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${eastAuditToken}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] }),
    });
    expect(res.status).toBeLessThan(300);
    const refused = await fetch(`${host!.url}/v1/events`, {
      method: "POST",
      headers: { authorization: "Bearer not-a-cluster-token-0123", "content-type": "application/json" },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] }),
    });
    expect(refused.status).toBe(401);

    // A Cluster named like the declared hub: refused, in a log line and a Warning Event on it.
    await registerCluster("hub", kubeconfigOf("east"));
    await eventually(
      "the hub Cluster refused",
      async () => {
        const events = await clusters.hub.admin.list(Resources.Event, { namespace: FLEET });
        return events.items.some(
          (e) =>
            (e as { reason?: string }).reason === "NameClash" &&
            (e as { regarding?: { name?: string } }).regarding?.name === "hub",
        )
          ? true
          : undefined;
      },
      60_000,
    );
    expect(
      lines.some(
        (l) =>
          l.msg === "Cluster refused" && l.fields?.key === `${FLEET}/hub` && l.fields?.reason === "NameClash",
      ),
    ).toBe(true);
    // The declared hub is still the one reconciled, through its own credential.
    expect(Object.keys(host!.clusters ?? {}).sort()).toEqual(["east", "hub", "west"]);
  }, 300_000);

  it("a fourth cluster joins when its Cluster is created and leaves when it is deleted", async () => {
    await startMember("fourth");
    const fourth = clusters.fourth;
    await fourth.admin.create(...proxy("edge"));
    await registerCluster("fourth", kubeconfigOf("fourth"));
    await ready("fourth", proxy("edge"));
    expect((await scrape()).some((l) => l.includes('cluster="fourth"'))).toBe(true);

    await clusters.hub.admin.delete(capiClusterResource, { namespace: FLEET, name: "fourth" });
    await eventually(
      "fourth stopped",
      async () =>
        lines.some((l) => l.msg === "stopped reconciling cluster" && l.fields?.cluster === "fourth")
          ? true
          : undefined,
      60_000,
    );
    const left = lines.length;
    expect(host!.clusters?.fourth).toBeUndefined();
    // Its series are gone from /metrics.
    expect((await scrape()).filter((l) => l.includes('cluster="fourth"'))).toEqual([]);
    // And nothing of it runs: while hub sweeps three more times (every cluster's sweep has the same
    // period), a new Proxy in fourth is left untouched.
    await fourth.admin.create(...proxy("edge-after"));
    const sweptAt = async () => {
      const line = (await scrape()).find(
        (l) =>
          l.startsWith("kubefn_sweep_last_success_timestamp_seconds{") &&
          l.includes('cluster="hub"') &&
          l.includes('controller="proxy"'),
      );
      return line ? Number(line.split(" ").at(-1)) : undefined;
    };
    const sweeps = new Set<number>();
    const createdAt = Date.now() / 1000;
    await eventually(
      "hub swept three times since",
      async () => {
        const at = await sweptAt();
        if (at !== undefined && at > createdAt) sweeps.add(at);
        return sweeps.size >= 3 ? true : undefined;
      },
      60_000,
    );
    await host!.clusters?.hub?.queue.idle();
    const after = await fourth.admin.get(proxyResource, { namespace: "default", name: "edge-after" });
    expect(after.metadata.finalizers ?? []).toEqual([]);
    expect(after.status).toBeUndefined();
    expect(lines.slice(left).filter((l) => l.fields?.cluster === "fourth")).toEqual([]);
  }, 300_000);

  it("east's API server stopped and west's credential revoked: hub keeps converging and probing", async () => {
    const probedAt = async () => {
      const line = (await scrape()).find(
        (l) =>
          l.startsWith("kubefn_proxy_last_probe_timestamp_seconds{") &&
          l.includes('cluster="hub"') &&
          l.includes('name="edge"'),
      );
      return line ? Number(line.split(" ").at(-1)) : undefined;
    };
    await clusters.east.devcluster.close();
    // West's kubefn ServiceAccount deleted: its bound token is refused from now on.
    await clusters.west.admin.delete(Resources.ServiceAccount, {
      namespace: "kubefn-system",
      name: "kubefn",
    });
    const isolatedAt = Date.now() / 1000;

    for (const o of [proxy("edge-2"), subPool("pool-2")]) await clusters.hub.admin.create(...o);
    await Promise.all([ready("hub", proxy("edge-2")), ready("hub", subPool("pool-2"))]);

    // Hub's first Proxy is probed again after the other two failed, time after time.
    const seen = new Set<number>();
    await eventually(
      "hub's Proxy probed three times since the isolation",
      async () => {
        const at = await probedAt();
        if (at !== undefined && at > isolatedAt) seen.add(at);
        return seen.size >= 3 ? true : undefined;
      },
      120_000,
    );

    // West says why, once, and its gauge names it; hub's does not.
    await eventually(
      "west's refused credential said and gauged",
      async () => {
        const text = await scrape();
        const refused = (cluster: string) =>
          text.find(
            (l) => l.startsWith("kubefn_api_credential_refused{") && l.includes(`cluster="${cluster}"`),
          );
        return refused("west")?.endsWith(" 1") && refused("hub")?.endsWith(" 0") ? true : undefined;
      },
      60_000,
    );
    const westRefused = lines.filter(
      (l) =>
        l.level === "error" && l.fields?.cluster === "west" && l.msg.includes("refuses kubefn's credential"),
    );
    expect(westRefused).toHaveLength(1);
    await eventually(
      "east's circuit opened, and only east's",
      async () => {
        const text = await scrape();
        const open = (cluster: string) =>
          text.find(
            (l) => l.startsWith("kubefn_api_circuit_opened_total{") && l.includes(`cluster="${cluster}"`),
          );
        return open("east") && !open("east")?.endsWith(" 0") && open("hub")?.endsWith(" 0")
          ? true
          : undefined;
      },
      120_000,
    );
  }, 300_000);
});
