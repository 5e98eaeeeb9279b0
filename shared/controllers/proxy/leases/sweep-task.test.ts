import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { proxyResource, type TestProxy, testProxy } from "../../../../test/support/proxies.ts";
import { formatMicroTime, type KubeObject, Resources } from "../../../kube/index.ts";
import { runSweepTask } from "../../../runtime/sweep/index.ts";
import { newLease, type ProxyLease } from "./lease.ts";
import { leaseSweepTask } from "./sweep-task.ts";

const now = new Date("2026-11-30T12:00:00Z");
const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);

function leaseFor(name: string, renewedSecondsAgo: number, uid = `uid-${name}`): ProxyLease {
  const lease = newLease({ namespace: "crawl", name, uid }, "crawler", 30, ago(renewedSecondsAgo));
  return lease;
}

function setup(proxies: TestProxy[], leases: ProxyLease[]) {
  const kube = new FakeKube(() => now);
  const primaries: KubeObject[] = proxies.map((p) => kube.seed(proxyResource, testProxy(p)));
  for (const l of leases) kube.seed(Resources.Lease, l);
  const { ctx, recorded } = fakeContext(kube, { now });
  const gauges: [string, number][] = [];
  ctx.metrics.gauge = (name, value) => gauges.push([name, value]);
  const remaining = async () => (await kube.list(Resources.Lease)).items.map((l) => l.metadata.name).sort();
  return { kube, ctx, recorded, gauges, primaries, remaining };
}

describe("leaseSweepTask", () => {
  it("keeps held and briefly expired leases, deletes the rest, sets kubefn_leases_held", async () => {
    const { ctx, primaries, remaining, gauges, recorded } = setup(
      [
        { name: "held" },
        { name: "late" },
        { name: "stale" },
        { name: "sick", phase: "Unhealthy" },
        { name: "replaced", uid: "uid-new" },
      ],
      [
        leaseFor("held", 10),
        leaseFor("late", 45),
        leaseFor("stale", 61),
        leaseFor("sick", 1),
        leaseFor("gone", 1),
        leaseFor("replaced", 1, "uid-old"),
      ],
    );
    const task = leaseSweepTask();
    expect(task.controller).toBe("proxy");
    expect(await runSweepTask(task, ctx, [primaries])).toEqual({ leases: 6, held: 1, deleted: 4, raced: 0 });
    expect(await remaining()).toEqual(["proxy-held", "proxy-late"]);
    expect(gauges).toEqual([["kubefn_leases_held", 1]]);
    expect(recorded.counts.map((c) => c.labels?.reason).sort()).toEqual([
      "ExpiredLongAgo",
      "ProxyGone",
      "ProxyNotReady",
      "ProxyReplaced",
    ]);
  });

  it("confirms with a fresh GET: a proxy created after the sweep listed keeps its lease", async () => {
    const { ctx, remaining } = setup([{ name: "new" }], [leaseFor("new", 1)]);
    expect(await runSweepTask(leaseSweepTask(), ctx, [[]])).toMatchObject({ deleted: 0, held: 1 });
    expect(await remaining()).toEqual(["proxy-new"]);
  });

  it("a lease changed since it was listed survives (resourceVersion precondition)", async () => {
    const { ctx, kube, primaries, remaining } = setup([{ name: "p" }], [leaseFor("p", 100)]);
    const original = kube.delete.bind(kube);
    kube.delete = async (res, key, opts) => {
      const current = kube.stored(res, key) as ProxyLease;
      kube.seed(res, {
        ...current,
        spec: { ...current.spec, renewTime: formatMicroTime(now) },
        metadata: { ...current.metadata, resourceVersion: undefined },
      });
      return original(res, key, opts);
    };
    expect(await runSweepTask(leaseSweepTask(), ctx, [primaries])).toMatchObject({ deleted: 0, raced: 1 });
    expect(await remaining()).toEqual(["proxy-p"]);
  });

  it("never touches a labelled lease without a Proxy ownerReference", async () => {
    const foreign = leaseFor("x", 1000);
    foreign.metadata.ownerReferences = [];
    const { ctx, remaining } = setup([], [foreign]);
    expect(await runSweepTask(leaseSweepTask(), ctx, [[]])).toMatchObject({ deleted: 0 });
    expect(await remaining()).toEqual(["proxy-x"]);
  });
});
