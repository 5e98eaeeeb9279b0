import { describe, expect, it } from "vitest";
import { proxyController as realProxyController } from "../../../shared/controllers/proxy/controller.ts";
import { subPoolController as realSubPoolController } from "../../../shared/controllers/subpool/controller.ts";
import { Resources } from "../../../shared/kube/resources.ts";
import type { Resource } from "../../../shared/runtime/core/index.ts";
import { RegistryError } from "../../../shared/runtime/definition/index.ts";
import { createRegistry } from "../../../shared/runtime/index.ts";
import { proxyController, siteController, subPoolController } from "./controllers.ts";

function problemsOf(run: () => unknown): readonly string[] {
  try {
    run();
  } catch (err) {
    if (err instanceof RegistryError) return err.problems;
    throw err;
  }
  return [];
}

describe("createRegistry", () => {
  const registry = createRegistry([proxyController(), subPoolController(), siteController()]);

  it("looks controllers up by name, primary kind, owned kind and watched kind", () => {
    expect(registry.controller("subpool")?.for.kind).toBe("SubPool");
    expect(registry.controller("nope")).toBeUndefined();
    expect(registry.primaryFor("crawl.example.com", "proxies")?.name).toBe("proxy");
    expect(registry.primaryForKind("subrelay.example.com", "SubPool")?.name).toBe("subpool");
    expect(registry.ownersOf("", "secrets").map((c) => c.name)).toEqual(["subpool"]);
    expect(registry.ownersOf("", "namespaces").map((c) => c.name)).toEqual(["subpool"]);
    expect(registry.watchersOf("", "secrets").map((w) => w.controller.name)).toEqual(["proxy"]);
    expect(registry.watchersOf("", "configmaps").map((w) => w.controller.name)).toEqual(["site"]);
    expect(registry.ownersOf("", "leases")).toEqual([]);
    expect(registry.primaryFor("", "pods")).toBeUndefined();
  });

  it.each([
    [
      "duplicate names",
      () => [proxyController(), proxyController({ for: { ...Resources.Lease } })],
      /name registered twice/,
    ],
    [
      "a condition type listed twice by one controller",
      () => [proxyController({ conditionTypes: ["Healthy", "Ready", "Healthy"] })],
      /condition type "Healthy" is listed twice/,
    ],
    [
      "two controllers for one kind",
      () => [proxyController(), siteController({ name: "proxy2", for: proxyController().for })],
      /already the primary of "proxy"/,
    ],
    [
      "an unresolvable kind",
      () => [
        proxyController({ owns: [{ group: "", version: "v1", resource: "", kind: "Pod" } as Resource] }),
      ],
      /resource must be the lowercase plural/,
    ],
    [
      "a resync under a minute",
      () => [proxyController({ resyncSeconds: 30 })],
      /resyncSeconds must be an integer/,
    ],
    ["a resync in milliseconds", () => [proxyController({ resyncSeconds: 600_000_000 })], /resyncSeconds/],
    [
      "a latch condition it does not publish",
      () => [subPoolController({ errorPolicy: { latch: { condition: "Nope" } } })],
      /errorPolicy.latch condition "Nope" is not among its conditionTypes/,
    ],
    [
      "a quota condition it does not publish",
      () => [subPoolController({ errorPolicy: { quota: { condition: "Nope" } } })],
      /errorPolicy.quota condition "Nope"/,
    ],
    // Regression: a Running proxy's requeueAfter(300) with resync 300 (and SubPool's 60 with 60)
    // was never sent, a hidden done(); a requeue that late is now refused at registration.
    [
      "a requeue as late as the resync",
      () => [proxyController({ resyncSeconds: 300, requeueSeconds: { poll: 5, driftPoll: 300 } })],
      /requeue "driftPoll" \(300 s\) is not shorter than resyncSeconds \(300 s\).*awaitSweep\(\)/,
    ],
    [
      "a requeue beyond the resync",
      () => [proxyController({ resyncSeconds: 60, requeueSeconds: { activeRequeue: 90 } })],
      /requeue "activeRequeue" \(90 s\)/,
    ],
    [
      "a requeue that is not a delay",
      () => [proxyController({ requeueSeconds: { poll: -1 } })],
      /requeue "poll"/,
    ],
    ["an empty registry", () => [], /no controllers registered/],
  ])("rejects %s", (_name, defs, message) => {
    const problems = problemsOf(() => createRegistry(defs()));
    expect(problems.join("\n")).toMatch(message);
  });

  it.each([
    ["the proxy", () => realProxyController({ providers: () => ({}) })],
    ["SubPool", () => realSubPoolController()],
    [
      "the proxy with a short drift poll",
      () => realProxyController({ providers: () => ({}), timings: { driftPoll: 60 } }),
    ],
  ])("accepts %s: every requeue it declares is shorter than its resync", (_name, def) => {
    const d = def();
    expect(Object.keys(d.requeueSeconds ?? {}).length).toBeGreaterThan(0);
    expect(() => createRegistry([d])).not.toThrow();
  });

  it("lets every kind publish its own Ready: condition types are per controller", () => {
    expect(() =>
      createRegistry([
        proxyController({ conditionTypes: ["Provisioned", "Ready"] }),
        subPoolController({ conditionTypes: ["Ready", "Suspended", "InvalidSpec"] }),
      ]),
    ).not.toThrow();
  });

  it("lists every problem in one error", () => {
    const run = () =>
      createRegistry([
        proxyController({ resyncSeconds: 1 }),
        proxyController({
          conditionTypes: ["Healthy", "Healthy"],
          for: { ...Resources.Lease, version: "1" },
        }),
      ]);
    expect(run).toThrow(RegistryError);
    const problems = problemsOf(run);
    expect(problems.length).toBeGreaterThanOrEqual(4);
    expect(problems.join("\n")).toMatch(/name registered twice/);
    expect(problems.join("\n")).toMatch(/version must look like v1/);
    expect(() => run()).toThrow(/invalid controller registry \(\d+ problems\)/);
  });
});
