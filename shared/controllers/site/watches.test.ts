import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { Resources } from "../../kube/resources.ts";
import type { WatchedChange } from "../../runtime/definition/index.ts";
import type { Watch } from "../../runtime/index.ts";
import { siteResource } from "./api.ts";
import { createWatchEnv, mergeWatches, siteFromConfigName } from "./watches.ts";

const env = createWatchEnv({
  namespace: "kubefn-system",
  fieldOwner: "unbounded-operator",
  controller: "site",
  config: { imageRegistry: "r", imageTag: "t", apiServerEndpoint: "https://api" },
});
const change = (name: string, namespace = "kubefn-system"): WatchedChange => ({
  resource: Resources.ConfigMap,
  key: { namespace, name },
  verb: "update",
});
const kube = new FakeKube();
const { ctx } = fakeContext(kube);

describe("siteFromConfigName", () => {
  it.each([
    ["metalman-config-", "metalman-config-west", "west"],
    ["metalman-config-", "metalman-config-a-b", "a-b"],
    ["metalman-config-", "metalman-config-", undefined],
    ["metalman-config-", "metalman-west", undefined],
    ["metalman-config-", "xmetalman-config-west", undefined],
    ["", "west", undefined],
  ])("prefix %j, name %j → %j", (prefix, name, site) => {
    expect(siteFromConfigName(prefix, name)).toBe(site);
  });
});

describe("key matchers", () => {
  it.each([
    ["net-config", "kubefn-system", true],
    ["other", "kubefn-system", false],
    ["net-config", "default", false],
  ])("inNamespaceNamed(net-config): %s in %s → %s", (name, namespace, expected) => {
    expect(env.inNamespaceNamed("net-config", "net-extra")({ namespace, name })).toBe(expected);
  });

  it.each([
    ["metalman-config-west", "kubefn-system", true],
    ["metalman-config-", "kubefn-system", false],
    ["metalman-config-west", "default", false],
  ])("inNamespaceWithPrefix: %s in %s → %s", (name, namespace, expected) => {
    expect(env.inNamespaceWithPrefix("metalman-config-")({ namespace, name })).toBe(expected);
  });
});

describe("mappers", () => {
  it.each([
    ["metalman-config-west", "kubefn-system", [{ controller: "site", name: "west" }]],
    ["metalman-config-", "kubefn-system", []],
    ["net-config", "kubefn-system", []],
    ["metalman-config-west", "default", []],
  ])("requestSiteFromConfigName: %s in %s", async (name, namespace, expected) => {
    expect(await env.requestSiteFromConfigName("metalman-config-")(ctx, change(name, namespace))).toEqual(
      expected,
    );
  });

  it("requestSingleton asks for __singletons", async () => {
    expect(await env.requestSingleton()(ctx, change("x"))).toEqual([
      { controller: "site", name: "__singletons" },
    ]);
  });

  it("requestSingletonAndAllSites lists the Sites", async () => {
    const k = new FakeKube();
    for (const name of ["east", "west"]) {
      k.seed(siteResource, { apiVersion: "unbounded-cloud.io/v1alpha3", kind: "Site", metadata: { name } });
    }
    const requests = await env.requestSingletonAndAllSites()(fakeContext(k).ctx, change("net-config"));
    expect(requests).toEqual([
      { controller: "site", name: "__singletons" },
      { controller: "site", name: "east" },
      { controller: "site", name: "west" },
    ]);
  });

  it("mapWhen filters by key", async () => {
    const map = env.mapWhen(env.inNamespaceNamed("net-config"), env.requestSingleton());
    expect(await map(ctx, change("net-config"))).toHaveLength(1);
    expect(await map(ctx, change("other"))).toEqual([]);
  });
});

describe("mergeWatches", () => {
  it("merges watches of one kind and deduplicates their requests", async () => {
    const a: Watch = { resource: Resources.ConfigMap, map: () => [{ controller: "site", name: "west" }] };
    const b: Watch = {
      resource: Resources.ConfigMap,
      map: async () => [
        { controller: "site", name: "west" },
        { controller: "site", name: "__singletons" },
      ],
    };
    const c: Watch = { resource: Resources.Secret, map: () => [] };
    const merged = mergeWatches([a, b, c]);
    expect(merged.map((w) => w.resource.kind)).toEqual(["ConfigMap", "Secret"]);
    expect(await merged[0]!.map(ctx, change("x"))).toEqual([
      { controller: "site", name: "west" },
      { controller: "site", name: "__singletons" },
    ]);
    expect(merged[1]).toBe(c);
  });
});
