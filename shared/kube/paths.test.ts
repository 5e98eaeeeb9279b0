import { describe, expect, it } from "vitest";
import { apiVersionOf, keyOf, resourcePath } from "./paths.ts";
import type { Resource } from "./port.ts";
import { Resources } from "./resources.ts";

const proxies: Resource = {
  group: "kubefn.dev",
  version: "v1alpha1",
  resource: "proxies",
  kind: "Proxy",
  namespaced: true,
};

describe("resourcePath", () => {
  it.each<{ name: string; res: Resource; parts: Parameters<typeof resourcePath>[1]; expected: string }>([
    { name: "core collection, all namespaces", res: Resources.Pod, parts: {}, expected: "/api/v1/pods" },
    {
      name: "core collection in a namespace",
      res: Resources.Pod,
      parts: { namespace: "default" },
      expected: "/api/v1/namespaces/default/pods",
    },
    {
      name: "core object",
      res: Resources.ConfigMap,
      parts: { namespace: "default", name: "settings" },
      expected: "/api/v1/namespaces/default/configmaps/settings",
    },
    {
      name: "cluster-scoped core object",
      res: Resources.Namespace,
      parts: { name: "team-a" },
      expected: "/api/v1/namespaces/team-a",
    },
    {
      name: "cluster-scoped ignores a stray namespace",
      res: Resources.ClusterRole,
      parts: { namespace: "default", name: "view" },
      expected: "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
    },
    {
      name: "group object",
      res: Resources.StatefulSet,
      parts: { namespace: "db", name: "pg" },
      expected: "/apis/apps/v1/namespaces/db/statefulsets/pg",
    },
    {
      name: "status subresource of a CR",
      res: proxies,
      parts: { namespace: "edge", name: "p1", subresource: "status" },
      expected: "/apis/kubefn.dev/v1alpha1/namespaces/edge/proxies/p1/status",
    },
    {
      name: "status subresource of a cluster-scoped kind",
      res: Resources.Namespace,
      parts: { name: "team-a", subresource: "status" },
      expected: "/api/v1/namespaces/team-a/status",
    },
    {
      name: "segments are encoded",
      res: Resources.ClusterRole,
      parts: { name: "system:controller:x/y" },
      expected: "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Acontroller%3Ax%2Fy",
    },
    {
      name: "query, undefined values left out, selectors encoded",
      res: Resources.Pod,
      parts: {
        namespace: "default",
        query: {
          labelSelector: "app in (a,b),!legacy",
          fieldSelector: "status.phase=Running",
          limit: 2,
          continue: undefined,
        },
      },
      expected:
        "/api/v1/namespaces/default/pods?labelSelector=app+in+%28a%2Cb%29%2C%21legacy&fieldSelector=status.phase%3DRunning&limit=2",
    },
  ])("$name", ({ res, parts, expected }) => {
    expect(resourcePath(res, parts)).toBe(expected);
  });

  it("refuses an object path of a namespaced kind without a namespace", () => {
    expect(() => resourcePath(Resources.Pod, { name: "web" })).toThrow(/namespaced/);
  });

  it("refuses an empty name", () => {
    expect(() => resourcePath(Resources.Namespace, { name: "" })).toThrow(/empty/);
  });

  // A URL parser resolves dot segments: ".../namespaces/ns/pods/.." would address the Namespace.
  it.each([
    [{ namespace: "ns", name: ".." }],
    [{ namespace: "ns", name: "." }],
    [{ namespace: "..", name: "web" }],
    [{ namespace: ".", name: "web" }],
  ])("refuses a dot segment the URL would resolve away (%o)", (parts) => {
    expect(() => resourcePath(Resources.Pod, parts)).toThrow(/not a valid/);
  });
});

describe("apiVersionOf", () => {
  it.each([
    { res: Resources.Pod, expected: "v1" },
    { res: Resources.Lease, expected: "coordination.k8s.io/v1" },
    { res: proxies, expected: "kubefn.dev/v1alpha1" },
  ])("$res.kind → $expected", ({ res, expected }) => {
    expect(apiVersionOf(res)).toBe(expected);
  });
});

describe("keyOf", () => {
  it.each([
    { metadata: { name: "a", namespace: "ns" }, expected: { name: "a", namespace: "ns" } },
    { metadata: { name: "a" }, expected: { name: "a" } },
  ])("$metadata", ({ metadata, expected }) => {
    expect(keyOf({ metadata })).toEqual(expected);
  });

  it("needs a name", () => {
    expect(() => keyOf({ metadata: {} })).toThrow(/name/);
  });
});
