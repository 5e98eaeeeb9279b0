import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { proxyResource, testProxy } from "../../../../test/support/proxies.ts";
import type { KubeObject } from "../../../kube/index.ts";
import { runSweepTask } from "../../../runtime/sweep/index.ts";
import {
  type Instance,
  NamespaceNotOptedInError,
  ownerTags,
  type Provider,
  ProviderError,
  type Tag,
} from "../providers/provider.ts";
import { orphanSweepTask } from "./sweep-task.ts";

const now = new Date("2026-11-30T12:00:00Z");

/** A provider over a list of instances, recording deletes. */
function memoryProvider(instances: Instance[], opts: { failList?: boolean; failDelete?: string } = {}) {
  const deleted: string[] = [];
  const listed: Tag[] = [];
  const provider: Provider = {
    create: async () => {
      throw new Error("not used");
    },
    get: async () => {
      throw new Error("not used");
    },
    async delete(id) {
      if (id === opts.failDelete) throw new ProviderError("transient", "Unavailable", "try later");
      deleted.push(id);
    },
    async listByTag(tag) {
      listed.push(tag);
      if (opts.failList) throw new ProviderError("transient", "Unavailable", "down");
      return instances.filter((i) => i.tags[tag.key] === tag.value);
    },
  };
  return { provider, deleted, listed };
}

const run = (i: string, uid: string): Instance => ({
  id: i,
  state: "Running",
  tags: ownerTags(uid),
  createdAt: "2026-01-01T00:00:00Z",
});

/**
 * A namespaced provider (the pod provider's shape) under per-namespace RBAC: the cluster-wide list
 * is refused, and so is every namespace not in `optedIn`.
 */
function namespacedProvider(byNamespace: Record<string, Instance[]>, optedIn: readonly string[]) {
  const deleted: string[] = [];
  const listed: string[] = [];
  const provider: Provider = {
    namespaced: true,
    create: async () => {
      throw new Error("not used");
    },
    get: async () => {
      throw new Error("not used");
    },
    async delete(id) {
      deleted.push(id);
    },
    async listByTag(_tag, scope) {
      listed.push(scope?.namespace ?? "*");
      if (!scope) throw new NamespaceNotOptedInError("", "list pods in all namespaces");
      if (!optedIn.includes(scope.namespace))
        throw new NamespaceNotOptedInError(scope.namespace, "list pods");
      return byNamespace[scope.namespace] ?? [];
    },
  };
  return { provider, deleted, listed };
}

describe("orphanSweepTask", () => {
  it("where kubefn-tenant is bound per namespace, lists each namespace of a Proxy naming the provider once, and skips one not opted in", async () => {
    const kube = new FakeKube(() => now);
    const proxies = [
      kube.seed(proxyResource, testProxy({ name: "a1", namespace: "team-a", mode: "Managed" })),
      kube.seed(proxyResource, testProxy({ name: "a2", namespace: "team-a", mode: "Managed" })),
      kube.seed(proxyResource, testProxy({ name: "c1", namespace: "closed", mode: "Managed" })),
      kube.seed(proxyResource, testProxy({ name: "e1", namespace: "external-only" })),
    ];
    const pods = namespacedProvider({ "team-a": [run("pod-a1", "uid-a1"), run("pod-orphan", "uid-gone")] }, [
      "team-a",
      "external-only",
    ]);
    const { ctx } = fakeContext(kube, { now });
    const counts = await runSweepTask(
      orphanSweepTask({ providers: { kubernetes: pods.provider }, graceSeconds: 0 }),
      ctx,
      [proxies.slice(0, 2), proxies.slice(2)],
    );
    expect(counts).toEqual({ instances: 2, orphans: 1, collected: 1, failed: 0 });
    expect(pods.deleted).toEqual(["pod-orphan"]);
    expect(pods.listed).toEqual(["*", "team-a", "closed"]);
  });

  it("deletes instances whose Proxy is gone, by the managed-by tag, and counts them", async () => {
    const kube = new FakeKube(() => now);
    const live = kube.seed(proxyResource, testProxy({ name: "live", uid: "uid-live", mode: "Managed" }));
    const pods = memoryProvider([
      run("pod-live", "uid-live"),
      run("pod-orphan", "uid-gone"),
      { id: "pod-untagged", state: "Running", tags: { app: "other" } },
    ]);
    const vms = memoryProvider([run("vm-orphan", "uid-gone-2")]);
    const { ctx, recorded } = fakeContext(kube, { now });
    const task = orphanSweepTask({
      providers: { kubernetes: pods.provider, gce: vms.provider },
      graceSeconds: 0,
    });
    expect(task.controller).toBe("proxy");
    expect(await runSweepTask(task, ctx, [[live]])).toEqual({
      instances: 3,
      orphans: 2,
      collected: 2,
      failed: 0,
    });
    expect(pods.deleted).toEqual(["pod-orphan"]);
    expect(vms.deleted).toEqual(["vm-orphan"]);
    expect(pods.listed).toEqual([{ key: "crawl.kubefn.dev/managed-by", value: "kubefn" }]);
    expect(recorded.counts.filter((c) => c.name === "kubefn_orphans_collected_total")).toEqual([
      { name: "kubefn_orphans_collected_total", labels: { provider: "gce" } },
      { name: "kubefn_orphans_collected_total", labels: { provider: "kubernetes" } },
    ]);
  });

  it("spares an instance whose Proxy appeared after the sweep listed (confirmation re-list)", async () => {
    const kube = new FakeKube(() => now);
    kube.seed(proxyResource, testProxy({ name: "new", uid: "uid-new", mode: "Managed" }));
    const pods = memoryProvider([run("pod-new", "uid-new")]);
    const { ctx } = fakeContext(kube, { now });
    const swept: KubeObject[] = [];
    const counts = await runSweepTask(
      orphanSweepTask({ providers: { kubernetes: pods.provider }, graceSeconds: 0 }),
      ctx,
      [swept],
    );
    expect(counts).toMatchObject({ orphans: 0, collected: 0 });
    expect(pods.deleted).toEqual([]);
  });

  it("respects the grace period", async () => {
    const kube = new FakeKube(() => now);
    const pods = memoryProvider([
      { ...run("young", "uid-gone"), createdAt: "2026-11-30T11:55:00Z" } as Instance,
      { ...run("old", "uid-gone"), createdAt: "2026-11-30T11:49:00Z" } as Instance,
    ]);
    const { ctx } = fakeContext(kube, { now });
    await runSweepTask(orphanSweepTask({ providers: { kubernetes: pods.provider } }), ctx, [[]]);
    expect(pods.deleted).toEqual(["old"]);
  });

  it("a failing provider is counted and the others proceed", async () => {
    const kube = new FakeKube(() => now);
    const broken = memoryProvider([], { failList: true });
    const flaky = memoryProvider([run("a", "uid-gone"), run("b", "uid-gone")], { failDelete: "a" });
    const { ctx, recorded } = fakeContext(kube, { now });
    const counts = await runSweepTask(
      orphanSweepTask({
        providers: { broken: broken.provider, flaky: flaky.provider },
        graceSeconds: 0,
      }),
      ctx,
      [[]],
    );
    expect(counts).toEqual({ instances: 2, orphans: 2, collected: 1, failed: 2 });
    expect(flaky.deleted).toEqual(["b"]);
    expect(recorded.logs.filter((l) => l.level === "error")).toHaveLength(2);
  });

  it("makes no API call when nothing is orphaned", async () => {
    const kube = new FakeKube(() => now);
    const { ctx } = fakeContext(kube, { now });
    await runSweepTask(orphanSweepTask({ providers: { kubernetes: memoryProvider([]).provider } }), ctx, [
      [],
    ]);
    expect(kube.calls).toEqual([]);
  });
});
