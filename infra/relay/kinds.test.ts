import { describe, expect, it } from "vitest";
import { createOperators } from "../../shared/app/operators.ts";
import { controllerKinds } from "../../shared/controllers/index.ts";
import { proxyController, proxyResource } from "../../shared/controllers/proxy/index.ts";
import { Resources } from "../../shared/kube/index.ts";
import type { Resource } from "../../shared/kube/port.ts";
import { type ControllerDefinition, createRegistry, done, resourceKey } from "../../shared/runtime/index.ts";
import { relayKindsFor } from "./kinds.ts";
import { defaultRelayKinds } from "./main.ts";

const kindsOf = (defs: ControllerDefinition[]) =>
  relayKindsFor(createRegistry(defs)).map((k) => `${k.resource.resource}:${k.predicate}`);

const controller = (
  name: string,
  primary: Resource,
  extra: Partial<ControllerDefinition> = {},
): ControllerDefinition => ({
  name,
  for: primary,
  conditionTypes: [`${name}Ready`],
  resyncSeconds: 300,
  reconcile: async () => done(),
  ...extra,
});
const widgets: Resource = {
  group: "example.com",
  version: "v1",
  resource: "widgets",
  kind: "Widget",
  namespaced: true,
};
const gadgets: Resource = {
  group: "example.com",
  version: "v1",
  resource: "gadgets",
  kind: "Gadget",
  namespaced: false,
};
const watch = (resource: Resource) => ({ resource, map: () => [] });

describe("relayKindsFor", () => {
  it("the proxy controller: Proxies by spec, Secrets by payload", () => {
    expect(kindsOf([proxyController({ providers: () => ({}) })])).toEqual([
      "proxies:spec",
      "secrets:payload",
    ]);
  });

  it("by default, every kind the three operators need, each once — but never Secrets", () => {
    const kinds = defaultRelayKinds().map((k) => `${k.resource.resource}:${k.predicate}`);
    expect(kinds[0]).toBe("proxies:spec");
    expect(kinds.filter((k) => k.startsWith("secrets:"))).toEqual([]);
    expect(kinds).toEqual(
      expect.arrayContaining([
        "subpools:spec",
        "sites:spec",
        "configmaps:payload",
        // Issue 33: a SubPool's StatefulSet's and a Site component's Deployment's readiness.
        "statefulsets:readiness",
        "deployments:readiness",
        "namespaces:spec",
      ]),
    );
    expect(new Set(kinds.map((k) => k.split(":")[0])).size).toBe(kinds.length);
    expect(defaultRelayKinds()[0]!.resource).toEqual(proxyResource);
  });

  // The relay learns its kinds from each operator's declared kinds (shared/controllers operators) instead of
  // building the operators; this holds the list equal to what the operators declare.
  it("the static list is exactly what the registry every platform runs declares, per controller", () => {
    const { registry } = createOperators({
      prober: { probe: async () => ({ ok: false, latencyMs: 0 }) },
      sweepPeriodSeconds: 60,
    });
    const declared = registry.controllers.map((c) => ({
      controller: c.name,
      kinds: [
        ...new Set([c.for, ...(c.owns ?? []), ...(c.watches ?? []).map((w) => w.resource)].map(resourceKey)),
      ].sort(),
    }));
    const listed = controllerKinds().map((c) => ({
      controller: c.controller,
      kinds: [...new Set(c.kinds.map(resourceKey))].sort(),
    }));
    expect(listed).toEqual(declared);
    // The kinds each reports the readiness of, as its controller takes it (readinessFrom).
    expect(controllerKinds().map((c) => (c.readinessFrom ?? []).map(resourceKey).sort())).toEqual(
      registry.controllers.map((c) => (c.readinessFrom ?? []).map(resourceKey).sort()),
    );
    // Less Secrets: the relay's identity may not list them (infra/relay/manifests.yaml).
    expect(defaultRelayKinds()).toEqual(
      relayKindsFor(registry).filter((k) => !(k.resource.group === "" && k.resource.resource === "secrets")),
    );
  });

  it("primary and owned kinds by spec, watched ConfigMaps by payload, other watched kinds by spec, each once", () => {
    expect(
      kindsOf([
        controller("a", widgets, { owns: [Resources.Namespace], watches: [watch(Resources.ConfigMap)] }),
        controller("b", gadgets, {
          watches: [watch(Resources.ConfigMap), watch(Resources.Namespace), watch(widgets)],
        }),
      ]),
    ).toEqual(["widgets:spec", "namespaces:spec", "configmaps:payload", "gadgets:spec"]);
  });

  it("an owned kind a controller takes readiness from is watched by readiness; a payload kind stays payload", () => {
    expect(
      kindsOf([
        controller("a", widgets, {
          owns: [Resources.StatefulSet, Resources.Namespace],
          readinessFrom: [Resources.StatefulSet],
        }),
        controller("b", gadgets, { owns: [Resources.StatefulSet] }),
      ]),
    ).toEqual(["widgets:spec", "statefulsets:readiness", "namespaces:spec", "gadgets:spec"]);
  });

  // Regression: with SubPool owning Secrets, "spec won" and a rotated cloud-init Secret (no
  // generation) was no longer forwarded.
  it("a Secret both owned and watched is watched by payload", () => {
    expect(
      kindsOf([
        controller("a", widgets, { watches: [watch(Resources.Secret)] }),
        controller("b", gadgets, { owns: [Resources.Secret] }),
      ]),
    ).toEqual(["widgets:spec", "secrets:payload", "gadgets:spec"]);
  });
});
