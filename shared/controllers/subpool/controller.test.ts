import { describe, expect, it } from "vitest";
import { createRegistry } from "../../runtime/index.ts";
import { proxyController } from "../proxy/controller.ts";
import { subPoolController } from "./controller.ts";

describe("subPoolController", () => {
  it("registers beside the proxy controller: owned kinds, a 60 s+ resync", () => {
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
    expect(registry.controller("subpool")?.resyncSeconds).toBe(60);
  });

  it("the operator configuration is a value fixed at construction: nothing watches a ConfigMap", () => {
    const registry = createRegistry([subPoolController()]);
    expect(registry.watchersOf("", "configmaps")).toEqual([]);
  });
});
