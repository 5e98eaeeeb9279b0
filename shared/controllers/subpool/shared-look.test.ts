/**
 * Seed 003's 30 s look at the shared proxy gateway and Gateways, for all pools together: the
 * sweep's drift reads them, a job half a period later reads them again, and only a change sends
 * passes — to the pools it concerns.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { subPoolObject } from "../../../test/support/subpools.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { createRegistry, type JobMessage, type PassMessage, runPass, runSweep } from "../../runtime/index.ts";
import { subPoolResource } from "./api.ts";
import { defaultOperatorConfig } from "./config.ts";
import { subPoolController } from "./controller.ts";
import { endpointSliceResource } from "./desired.ts";
import { sharedLookSweepTask, sharedLookTask } from "./shared-look.ts";

const registry = createRegistry([subPoolController({ randomBytes: (n) => new Uint8Array(n).fill(7) })]);
const task = sharedLookSweepTask(defaultOperatorConfig, 30);
const pools = ["a", "b", "c"];

let kube: FakeKube;
let ctx: ReturnType<typeof fakeContext>["ctx"];
let recorded: ReturnType<typeof fakeContext>["recorded"];

const slice = (ready: boolean): KubeObject =>
  ({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "mihomo-abc",
      namespace: "subrelay-system",
      labels: { "kubernetes.io/service-name": "mihomo" },
    },
    endpoints: [{ addresses: ["10.0.0.9"], conditions: { ready } }],
  }) as KubeObject;
const pass = (name: string) =>
  runPass(ctx, registry, { request: { controller: "subpool", name }, attempt: 0 });
const condition = (name: string, type: string) =>
  (
    kube.stored(subPoolResource, { name })?.status as
      | { conditions?: { type: string; status: string }[] }
      | undefined
  )?.conditions?.find((c) => c.type === type);

/** One sweep with the task; the job it sent and the passes. */
async function sweep(): Promise<{ job?: JobMessage; delay?: number; passes: PassMessage[] }> {
  recorded.sent.length = 0;
  await runSweep(ctx, registry, [task], { shardSize: 100, attachListed: false });
  const jobs = recorded.sent.flatMap((s) => (s.jobs ?? []).map((m) => ({ m, delay: s.delaySeconds })));
  const job = jobs.find((s) => s.m.job.task === sharedLookTask);
  return {
    ...(job ? { job: job.m, delay: job.delay } : {}),
    passes: recorded.sent.flatMap((s) => s.messages),
  };
}

/** Runs the job as the queue would deliver it: the controller's job handler. */
async function look(job: JobMessage): Promise<PassMessage[]> {
  recorded.sent.length = 0;
  const handler = registry.controller("subpool")!.jobs![sharedLookTask]!;
  await handler(ctx, job.job.objects, job.job.data);
  return recorded.sent.flatMap((s) => s.messages);
}

beforeEach(async () => {
  kube = new FakeKube();
  ({ ctx, recorded } = fakeContext(kube));
  kube.seed(endpointSliceResource, slice(true));
  for (const name of pools) {
    kube.seed(subPoolResource, subPoolObject({}, { name, uid: `uid-${name}` }));
    await pass(name);
    const sts = kube.stored(Resources.StatefulSet, {
      namespace: `subpool-${name}`,
      name: `${name}-cpa-manager`,
    })!;
    kube.seed(Resources.StatefulSet, { ...sts, status: { replicas: 1, readyReplicas: 1 } });
    await pass(name);
    expect(condition(name, "Ready")).toMatchObject({ status: "True" });
  }
});

describe("the shared look half a drift period after the drift", () => {
  it("the proxy gateway losing its endpoint 30 s after the drift: every active pool gets a pass then, not at the next drift", async () => {
    const { job, delay, passes } = await sweep();
    expect(passes).toEqual([]);
    expect(delay).toBe(30);
    kube.seed(endpointSliceResource, slice(false));
    const sent = await look(job!);
    expect(sent.map((m) => [m.request.name, m.trigger])).toEqual(
      pools.map((name) => [name, { kind: "drift", reason: sharedLookTask }]),
    );
    for (const m of sent) await runPass(ctx, registry, m);
    for (const name of pools) expect(condition(name, "ProxyGatewayReady")).toMatchObject({ status: "False" });
  });

  it("nothing changed: the look is one list (the proxy gateway's EndpointSlices) whatever the number of pools, and sends nothing", async () => {
    kube.calls.length = 0;
    const { job } = await sweep();
    // The drift and the task share the sweep's one read of the proxy gateway.
    expect(kube.calls.filter((c) => c.resource === "endpointslices")).toHaveLength(1);
    kube.calls.length = 0;
    expect(await look(job!)).toEqual([]);
    expect(kube.calls.map((c) => `${c.method} ${c.resource}`)).toEqual(["list endpointslices"]);
  });

  it("a suspended pool is not looked at", async () => {
    const { job } = await sweep();
    const a = kube.stored(subPoolResource, { name: "a" })!;
    kube.seed(subPoolResource, { ...a, spec: { ...(a.spec as object), suspend: true } });
    kube.seed(endpointSliceResource, slice(false));
    expect((await look(job!)).map((m) => m.request.name)).toEqual(["b", "c"]);
  });
});
