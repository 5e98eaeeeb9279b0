import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { subPoolObject } from "../../../test/support/subpools.ts";
import type { KubeObject, Resource } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { createRegistry, type PassMessage, runPass, runSweep } from "../../runtime/index.ts";
import { subPoolResource } from "./api.ts";
import { parseOperatorConfig } from "./config.ts";
import { subPoolController } from "./controller.ts";
import { endpointSliceResource } from "./desired.ts";
import { longestWaitingLook, waitingLookDue } from "./drift.ts";

const ns = "subpool-demo";
const registry = createRegistry([subPoolController({ randomBytes: (n) => new Uint8Array(n).fill(7) })]);

let kube: FakeKube;
let ctx: ReturnType<typeof fakeContext>["ctx"];
let recorded: ReturnType<typeof fakeContext>["recorded"];

/** One sweep (drift due: resync 60, the fake clock's minute); the messages it sent. */
async function sweep(): Promise<PassMessage[]> {
  recorded.sent.length = 0;
  await runSweep(ctx, registry, [], { shardSize: 100, attachListed: true, safetyNetSeconds: 7 * 86_400 });
  return recorded.sent.flatMap((s) => s.messages);
}

/** Runs the passes the sweep asked for, as the queue would. */
async function deliver(messages: PassMessage[]): Promise<void> {
  for (const m of messages) await runPass(ctx, registry, m);
}

const edit = (res: Resource, name: string, change: (o: KubeObject) => void) => {
  const o = kube.stored(res, { namespace: ns, name })!;
  change(o);
  kube.seed(res, { ...o, metadata: { ...o.metadata, resourceVersion: undefined } });
};

beforeEach(async () => {
  kube = new FakeKube();
  ({ ctx, recorded } = fakeContext(kube));
  kube.seed(subPoolResource, subPoolObject());
  await runPass(ctx, registry, { request: { controller: "subpool", name: "demo" }, attempt: 0 });
  await runPass(ctx, registry, { request: { controller: "subpool", name: "demo" }, attempt: 0 });
});

/** What the sweep listed: the resource of each list call. */
const lists = () => kube.calls.filter((c) => c.method === "list").map((c) => c.resource);

describe("SubPool drift found by lists", () => {
  it("a converged pool gets no drift message; the sweep lists the SubPools and their Namespaces, nothing inside them", async () => {
    kube.calls.length = 0;
    expect(await sweep()).toEqual([]);
    // The operator configuration is fixed for the process: no read at all beyond the lists (the
    // proxy gateway's EndpointSlices are state no pool owns).
    expect(kube.calls.filter((c) => c.method === "get")).toEqual([]);
    expect(lists().sort()).toEqual(["endpointslices", "namespaces", "subpools"]);
    // Metadata only: the Namespaces' bodies never reach the sweep.
    expect(kube.calls.find((c) => c.resource === "namespaces")?.key).toBeUndefined();
  });

  it.each([
    ["the Namespace deleted", "missing:Namespace", () => kube.delete(Resources.Namespace, { name: ns })],
    [
      "the spec edited (generation moved)",
      "generation",
      async () => {
        const pool = kube.stored(subPoolResource, { name: "demo" })!;
        kube.seed(subPoolResource, {
          ...pool,
          metadata: { ...pool.metadata, generation: 2, resourceVersion: undefined },
          spec: { ...(pool.spec as object), suspend: true },
        });
      },
    ],
    [
      "the shared proxy gateway got a ready endpoint (state no pool owns)",
      "status:ProxyGatewayReady",
      async () =>
        kube.seed(endpointSliceResource, {
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: {
            name: "mihomo-1",
            namespace: "subrelay-system",
            labels: { "kubernetes.io/service-name": "mihomo" },
          },
          endpoints: [{ addresses: ["10.0.0.9"], conditions: { ready: true } }],
        } as KubeObject),
    ],
  ])("%s → reason %s, and the pass it sends converges it", async (_, reason, change) => {
    await change();
    const sent = await sweep();
    expect(sent.map((m) => m.trigger)).toEqual([{ kind: "drift", reason }]);
    await deliver(sent);
    // A pass that only changed the world (recreated an object) may need one more look at it.
    await deliver(await sweep());
    expect(await sweep()).toEqual([]);
  });

  it.each([
    [
      "an owned ConfigMap deleted by hand",
      () => kube.delete(Resources.ConfigMap, { namespace: ns, name: "demo-config" }),
    ],
    [
      "the StatefulSet's image edited by hand",
      async () =>
        edit(Resources.StatefulSet, "demo-cpa-manager", (o) => {
          (o.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec
            .containers[0]!.image = "evil:1";
        }),
    ],
  ])(
    "%s: not the sweep's to find (nothing inside the Namespace is listed) — the object's event brings the pass that repairs it",
    async (_, change) => {
      await change();
      expect(await sweep()).toEqual([]);
      // What intake sends for a write in subpool-demo: a pass for the pool, a key and no body.
      await deliver([{ request: { controller: "subpool", name: "demo" }, attempt: 0 }]);
      expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "demo-config" })).toBeDefined();
      const image = (
        kube.stored(Resources.StatefulSet, { namespace: ns, name: "demo-cpa-manager" })!.spec as {
          template: { spec: { containers: { image: string }[] } };
        }
      ).template.spec.containers[0]?.image;
      expect(image).not.toBe("evil:1");
      expect(await sweep()).toEqual([]);
    },
  );

  it("the StatefulSet turning ready is its own event: the pass it brings writes Ready, and the sweep stays quiet after", async () => {
    await edit(Resources.StatefulSet, "demo-cpa-manager", (o) => {
      o.status = { readyReplicas: 1 };
    });
    expect(await sweep()).toEqual([]);
    await deliver([{ request: { controller: "subpool", name: "demo" }, attempt: 0 }]);
    const ready = (
      kube.stored(subPoolResource, { name: "demo" })!.status as {
        conditions: { type: string; reason: string; message: string }[];
      }
    ).conditions.find((c) => c.type === "Ready");
    // The fake cluster has no proxy gateway: Ready now waits on it, no longer on the StatefulSet.
    expect(ready?.reason).toBe("ProxyGatewayNotReady");
    expect(await sweep()).toEqual([]);
  });

  it("a process with a lowered envelope: the drift sends the running pool one pass (reason envelope) that writes AboveEnvelope, then quiet", async () => {
    const parsed = parseOperatorConfig({ maxCPU: "500m", maxMemory: "512Mi" });
    if (!parsed.ok) throw new Error(parsed.message);
    const lowered = createRegistry([
      subPoolController({ operatorConfig: parsed.config, randomBytes: (n) => new Uint8Array(n).fill(7) }),
    ]);
    const sweepWith = async () => {
      recorded.sent.length = 0;
      await runSweep(ctx, lowered, [], { shardSize: 100, attachListed: true, safetyNetSeconds: 7 * 86_400 });
      return recorded.sent.flatMap((s) => s.messages);
    };
    const sent = await sweepWith();
    expect(sent.map((m) => m.trigger)).toEqual([{ kind: "drift", reason: "envelope" }]);
    for (const m of sent) await runPass(ctx, lowered, m);
    expect(await sweepWith()).toEqual([]);
  });

  it("a foreign Namespace: one pass reports the conflict, then quiet (one GET of it) until it is gone", async () => {
    await kube.delete(Resources.Namespace, { name: ns });
    kube.seed(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    const first = await sweep();
    // The label-selected list cannot see an unlabelled Namespace: it reads as missing.
    expect(first.map((m) => m.trigger?.reason)).toEqual(["missing:Namespace"]);
    await deliver(first);
    kube.calls.length = 0;
    expect(await sweep()).toEqual([]);
    expect(kube.calls.filter((c) => c.method === "get").map((c) => c.resource)).toEqual(["namespaces"]);
    await kube.delete(Resources.Namespace, { name: ns });
    expect((await sweep()).map((m) => m.trigger?.reason)).toEqual(["missing:Namespace"]);
  });
});

describe("the sweep's look at a pool waiting on its own StatefulSet (its readiness is a status write)", () => {
  it.each(["u-1", "u-2", "0b1c"])(
    "pool %s: none in the pass's own three minutes of looks, then one per half its wait, never an hour apart",
    (uid) => {
      const since = Date.parse("2026-12-04T00:00:30Z");
      const ready = { lastTransitionTime: new Date(since).toISOString() };
      const pool = { metadata: { uid, name: "p" } } as KubeObject;
      const looks: number[] = [];
      for (let minute = 0; minute < 24 * 60; minute++) {
        if (waitingLookDue(pool, ready, new Date(since + minute * 60_000))) looks.push(minute);
      }
      const gaps = looks.slice(1).map((at, i) => at - looks[i]!);
      expect(looks[0]).toBe(3);
      // Late by at most about half the time waited, and by an hour at most.
      looks.slice(1).forEach((at, i) => {
        expect(gaps[i]).toBeLessThanOrEqual(Math.max(2, Math.ceil(at / 2) + 1));
      });
      expect(Math.max(...gaps)).toBeLessThanOrEqual(longestWaitingLook / 60);
      // About nine in the first hour, then one an hour: 33 in a day, not 1,440.
      expect(looks.filter((at) => at < 60).length).toBeLessThanOrEqual(10);
      expect(looks.length).toBeLessThanOrEqual(34);
    },
  );

  it("a converged pool that has waited long on its StatefulSet gets a look from the sweep, and the look finds it ready", async () => {
    await edit(Resources.StatefulSet, "demo-cpa-manager", (o) => {
      o.status = { readyReplicas: 1 };
    });
    // Minute by minute past the pass's own looks, as the sweep runs, until the pool's slot comes.
    const start = ctx.clock.now().getTime();
    const sent: PassMessage[] = [];
    for (let minute = 1; minute <= 10 && sent.length === 0; minute++) {
      const at = new Date(start + minute * 60_000);
      ctx = { ...ctx, clock: { now: () => at } };
      sent.push(...(await sweep()));
    }
    expect(sent.map((m) => m.trigger)).toEqual([{ kind: "drift", reason: "waiting:StatefulSetNotReady" }]);
    await deliver(sent);
    const ready = (
      kube.stored(subPoolResource, { name: "demo" })!.status as {
        conditions: { type: string; reason: string }[];
      }
    ).conditions.find((c) => c.type === "Ready");
    expect(ready?.reason).toBe("ProxyGatewayNotReady");
  });
});
