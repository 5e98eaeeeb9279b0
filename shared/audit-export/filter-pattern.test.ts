import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createOperators } from "../app/operators.ts";
import {
  eksAuditFilterPattern,
  gkeAuditLogFilter,
  MAX_FILTER_PATTERN_LENGTH,
  registryResources,
} from "./index.ts";

const registry = createOperators({
  prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
  sweepPeriodSeconds: 60,
}).registry;

describe("export filters derived from the registry", () => {
  it("name every kind a controller is for, owns or watches", () => {
    const resources = registryResources(registry);
    for (const c of registry.controllers) {
      expect(resources).toContain(c.for.resource);
      for (const o of c.owns ?? []) expect(resources).toContain(o.resource);
      for (const w of c.watches ?? []) expect(resources).toContain(w.resource.resource);
    }
  });

  it("the EKS pattern fits CloudWatch Logs' 1024 characters", () => {
    expect(eksAuditFilterPattern(registry).length).toBeLessThanOrEqual(MAX_FILTER_PATTERN_LENGTH);
  });

  it("docs/deploying/README.md's GKE sink filter is the registry's", () => {
    const page = readFileSync(new URL("../../docs/deploying/README.md", import.meta.url), "utf8");
    expect(page).toContain(gkeAuditLogFilter(registry, { project: "PROJECT_ID", cluster: "CLUSTER_NAME" }));
  });

  it.each([
    ["dev.kubefn.crawl.v1alpha1.proxies.create", true],
    ["io.k8s.core.v1.secrets.update", true],
    ["io.k8s.apps.v1.statefulsets.scale.patch", true],
    ["com.example.subrelay.v1alpha1.subpools.deletecollection", true],
    ["dev.kubefn.crawl.v1alpha1.proxies.status.patch", false],
    // Issue 33: the readiness of a SubPool's StatefulSet and of a Site component's Deployment.
    ["io.k8s.apps.v1.statefulsets.status.update", true],
    ["io.k8s.apps.v1.deployments.status.update", true],
    ["io.k8s.core.v1.services.status.update", false],
    ["io.k8s.policy.v1.poddisruptionbudgets.status.update", false],
    ["io.k8s.core.v1.pods.create", false],
    ["io.k8s.core.v1.namespaces.finalize.update", false],
    ["io.k8s.core.v1.secrets.get", false],
  ])("the GKE filter's method regex: %s → %s", (method, passes) => {
    const filter = gkeAuditLogFilter(registry, { project: "p", cluster: "c" });
    const regex = /methodName=~"(.*)"$/.exec(filter)![1]!;
    expect(new RegExp(regex).test(method)).toBe(passes);
  });
});
