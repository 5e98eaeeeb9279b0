import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { subPoolObject } from "../../../test/support/subpools.ts";
import { Resources } from "../../kube/resources.ts";
import { createRegistry } from "../../runtime/registry.ts";
import { proxyController } from "../proxy/controller.ts";
import { subPoolResource } from "./api.ts";
import { subPoolController, subPoolsForOperatorConfig } from "./controller.ts";

describe("subPoolController", () => {
  it("registers beside the proxy controller: owned kinds, the config watch, a 60 s+ resync", () => {
    const registry = createRegistry([proxyController({ providers: {} }), subPoolController()]);
    expect(registry.primaryFor("subrelay.example.com", "subpools")?.name).toBe("subpool");
    for (const [group, resource] of [
      ["", "namespaces"],
      ["", "secrets"],
      ["apps", "statefulsets"],
      ["policy", "poddisruptionbudgets"],
      ["networking.k8s.io", "networkpolicies"],
    ]) {
      expect(registry.ownersOf(group!, resource!).map((d) => d.name)).toEqual(["subpool"]);
    }
    expect(registry.watchersOf("", "configmaps").map((w) => w.controller.name)).toEqual(["subpool"]);
    expect(registry.controller("subpool")?.resyncSeconds).toBe(60);
  });

  it("a change to the operator configuration re-enqueues every SubPool; other ConfigMaps nothing", async () => {
    const kube = new FakeKube();
    kube.seed(subPoolResource, subPoolObject({}, { name: "a" }));
    kube.seed(subPoolResource, subPoolObject({}, { name: "b" }));
    const { ctx } = fakeContext(kube);
    const watch = subPoolsForOperatorConfig("subpool", {
      namespace: "kubefn-system",
      name: "subpool-operator-config",
    });
    const change = (namespace: string, name: string) => ({
      resource: Resources.ConfigMap,
      key: { namespace, name },
      verb: "update" as const,
    });
    expect(await watch.map(ctx, change("kubefn-system", "subpool-operator-config"))).toEqual([
      { controller: "subpool", name: "a" },
      { controller: "subpool", name: "b" },
    ]);
    expect(await watch.map(ctx, change("subpool-a", "a-config"))).toEqual([]);
    expect(kube.calls.filter((c) => c.method === "list")).toHaveLength(1);
  });
});
