/**
 * A serverless fleet's dispatch: each queue message runs in the kubefn of the cluster its envelope
 * names, never in another's; each cluster's sweep runs beside the others'. Each member is a real
 * kubefn (createKubefn over a FakeKube of its own).
 */
import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { encodeCloudWatchLogs } from "../audit-export/index.ts";
import { createRegistry, done, ENVELOPE_VERSION, type PassMessage } from "../runtime/index.ts";
import {
  type ClusterKubefn,
  clusterSettings,
  dispatchByCluster,
  type FleetSweepSummary,
} from "./cluster-dispatch.ts";
import { createKubefn } from "./kubefn.ts";
import type { Kubefn } from "./ports.ts";

const settings = parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" });
const passFor = (cluster: string | undefined, name = "p1"): PassMessage => ({
  v: ENVELOPE_VERSION,
  request: { controller: "proxy", namespace: "ns1", name },
  attempt: 0,
  ...(cluster ? { cluster } : {}),
});

/** Clusters `names`, each a kubefn whose passes record `cluster/name`; and the fleet's log. */
function fleet(names: readonly string[]) {
  const reconciled: string[] = [];
  const members: ClusterKubefn[] = names.map((cluster) => {
    const kube = new FakeKube();
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: `uid-${cluster}`, generation: 1 },
    });
    const { ctx } = fakeContext(kube);
    const kubefn = createKubefn(
      settings,
      { cluster, kube, queue: ctx.queue, prober: {} as never, log: ctx.log, metrics: ctx.metrics },
      {
        registry: createRegistry([
          proxyController({
            reconcile: async (pass) => {
              reconciled.push(`${cluster}/${pass.request.name}`);
              return done();
            },
          }),
        ]),
        sweepTasks: [],
      },
    );
    return { cluster, kubefn, credentials: {} };
  });
  const { ctx, recorded } = fakeContext(new FakeKube());
  const kubefn = dispatchByCluster(members, { log: ctx.log, metrics: ctx.metrics, maxBodyBytes: 1 << 20 });
  return { kubefn, members, reconciled, recorded };
}

describe("a queue batch of several clusters' messages", () => {
  it("runs each message in its own cluster's kubefn, verdicts in the batch's order", async () => {
    const { kubefn, reconciled } = fleet(["east", "west", "north"]);
    const verdicts = await kubefn.consume([
      { body: passFor("west") },
      { body: passFor("east") },
      { body: passFor("north") },
      { body: passFor("west", "absent") },
    ]);
    expect(reconciled.sort()).toEqual(["east/p1", "north/p1", "west/p1"]);
    expect(verdicts.map((v) => v.ack && v.pass?.key)).toEqual([
      "proxy/ns1/p1",
      "proxy/ns1/p1",
      "proxy/ns1/p1",
      "proxy/ns1/absent",
    ]);
  });

  it("drops a message naming a cluster not declared here, with an error line: never run as another's", async () => {
    const { kubefn, reconciled, recorded } = fleet(["east", "west"]);
    const verdicts = await kubefn.consume([{ body: passFor("south") }, { body: passFor("east") }]);
    expect(verdicts[0]).toEqual({ ack: true, dropped: true });
    expect(verdicts[1]).toMatchObject({ ack: true, pass: { result: "done" } });
    expect(reconciled).toEqual(["east/p1"]);
    expect(recorded.logs).toContainEqual({
      level: "error",
      msg: "queue message names a cluster this deployment does not declare; dropped",
      fields: { cluster: "south", declared: "east,west", kind: "pass" },
    });
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_dropped_total",
      labels: { reason: "other-cluster" },
    });
  });

  it("reads a message without a cluster (an earlier release's) as the default cluster's only", async () => {
    const undeclared = fleet(["east"]);
    expect(await undeclared.kubefn.consume([{ body: passFor(undefined) }])).toEqual([
      { ack: true, dropped: true },
    ]);
    expect(undeclared.reconciled).toEqual([]);
    const declared = fleet(["default", "east"]);
    await declared.kubefn.consume([{ body: passFor(undefined) }]);
    expect(declared.reconciled).toEqual(["default/p1"]);
  });

  it("records dead letters in their own cluster's kubefn, and drops an undeclared cluster's", async () => {
    const { kubefn, recorded } = fleet(["east"]);
    const verdicts = await kubefn.deadLetters([{ body: passFor("south") }]);
    expect(verdicts).toEqual([{ ack: true, dropped: true }]);
    expect(recorded.logs.at(-1)?.msg).toBe(
      "queue message names a cluster this deployment does not declare; dropped",
    );
  });
});

describe("a fleet's sweep", () => {
  /** `members` with `cluster`'s sweep replaced by `sweep`. */
  const withSweep = (members: ClusterKubefn[], cluster: string, sweep: Kubefn["sweep"]) =>
    members.map((m) => (m.cluster === cluster ? { ...m, kubefn: { ...m.kubefn, sweep } } : m));

  it("runs each cluster's sweep side by side: one that never ends holds back none of the others", async () => {
    const { members, recorded } = fleet(["east", "west", "north"]);
    let released: () => void = () => {};
    const hung = new Promise<void>((resolve) => {
      released = resolve;
    });
    const swept: string[] = [];
    const watched = withSweep(members, "east", async () => {
      await hung;
      return { controllers: {}, tasks: {}, durationMs: 0 };
    }).map((m) => ({
      ...m,
      kubefn: {
        ...m.kubefn,
        sweep: async (o?: Parameters<Kubefn["sweep"]>[0]) => {
          const summary = await m.kubefn.sweep(o);
          swept.push(m.cluster);
          return summary;
        },
      },
    }));
    const { ctx } = fakeContext(new FakeKube());
    const sweep = dispatchByCluster(watched, { log: ctx.log, metrics: ctx.metrics, maxBodyBytes: 1 }).sweep();
    await expect.poll(() => swept.sort()).toEqual(["north", "west"]);
    released();
    const summary = (await sweep) as FleetSweepSummary;
    expect(Object.keys(summary.clusters).sort()).toEqual(["east", "north", "west"]);
    expect(recorded.logs.filter((l) => l.level === "error")).toEqual([]);
  });

  it("logs a cluster's failed sweep and keeps the others'; throws only when every cluster's failed", async () => {
    const { members } = fleet(["east", "west"]);
    const failing: Kubefn["sweep"] = async () => {
      throw new Error("connect ECONNREFUSED");
    };
    const { ctx, recorded } = fakeContext(new FakeKube());
    const platform = { log: ctx.log, metrics: ctx.metrics, maxBodyBytes: 1 };
    const summary = await dispatchByCluster(withSweep(members, "east", failing), platform).sweep();
    expect(summary).toMatchObject({
      clusters: { east: { error: "Error: connect ECONNREFUSED" }, west: { durationMs: expect.any(Number) } },
    });
    expect(recorded.logs).toContainEqual({
      level: "error",
      msg: "sweep failed; the other clusters' sweeps stand",
      fields: { cluster: "east", error: "Error: connect ECONNREFUSED" },
    });
    const allFailing = withSweep(withSweep(members, "east", failing), "west", failing);
    await expect(dispatchByCluster(allFailing, platform).sweep()).rejects.toThrow(
      /every cluster's sweep failed/,
    );
  });
});

describe("a fleet's CloudWatch Logs intake (EKS audit logs)", () => {
  it("gives a delivery to the cluster whose log group it came from, and refuses one of no declared cluster", async () => {
    const { members } = fleet(["east", "west"]);
    const ingested: string[] = [];
    const grouped = members.map((m) => ({
      ...m,
      logGroups: [`/aws/eks/${m.cluster}-eks/cluster`],
      kubefn: {
        ...m.kubefn,
        ingest: async (d: Parameters<Kubefn["ingest"]>[0]) => {
          ingested.push(m.cluster);
          return m.kubefn.ingest(d);
        },
      },
    }));
    const { ctx, recorded } = fakeContext(new FakeKube());
    const kubefn = dispatchByCluster(grouped, { log: ctx.log, metrics: ctx.metrics, maxBodyBytes: 1 << 20 });
    const delivery = async (logGroup: string) => ({
      source: "cloudwatch-logs" as const,
      data: await encodeCloudWatchLogs({
        messageType: "DATA_MESSAGE",
        owner: "111122223333",
        logGroup,
        logStream: "kube-apiserver-audit-1",
        subscriptionFilters: ["kubefn"],
        logEvents: [],
      }),
    });
    await kubefn.ingest(await delivery("/aws/eks/west-eks/cluster"));
    expect(ingested).toEqual(["west"]);
    expect(await kubefn.ingest(await delivery("/aws/eks/south-eks/cluster"))).toEqual({
      enqueued: 0,
      acknowledged: "UnknownLogGroup",
      detail: "/aws/eks/south-eks/cluster",
    });
    expect(ingested).toEqual(["west"]);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_intake_rejected_total",
      labels: { reason: "UnknownLogGroup" },
    });
  });
});

describe("clusterSettings", () => {
  it("gives a cluster its own intake credentials and OIDC audience, none of the deployment's", () => {
    const own = clusterSettings(
      {
        ...settings,
        auditToken: "deployment-token-0123456789",
        oidcIssuer: {
          issuer: "https://kubefn.example",
          signingKey: "k",
          audience: "kubefn",
          subject: "s",
          tokenSeconds: 600,
        },
      },
      {
        name: "east",
        server: "https://east.example",
        credential: { kind: "oidc-issuer", audience: "east" },
        relaySecret: "relay-secret-of-east-0123",
      },
    );
    expect(own.auditToken).toBeUndefined();
    expect(own.relaySecret).toBe("relay-secret-of-east-0123");
    expect(own.oidcIssuer?.audience).toBe("east");
    expect(own.clusters).toBeUndefined();
  });
});
