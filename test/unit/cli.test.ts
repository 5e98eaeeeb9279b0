/**
 * The `kubefn` command's pure decisions: what kubefn's identity needs (derived from infra/rbac),
 * what it must not have on top, whether an installed object covers the release's, and what a dry
 * run changed. The cluster side is test/integration/cli.test.ts.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../cli/cluster.ts";
import { covers, excessVerbs, neededAccess, parseIdentity } from "../../cli/doctor.ts";
import { changedFields, changeOf, report } from "../../cli/install.ts";
import { installObjects } from "../../scripts/release/install-manifest.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const objects = installObjects(root, "0.0.0") as KubeObject[];
const kubefn = parseIdentity("kubefn-system/kubefn");

describe("neededAccess (from infra/rbac)", () => {
  const needs = neededAccess(objects, kubefn);
  const find = (resource: string, namespace?: string) =>
    needs.find((n) => n.resource === resource && n.namespace === namespace);

  it.each([
    ["proxies", undefined, ["get", "list", "patch"]],
    ["proxies/status", undefined, ["patch"]],
    ["secrets", undefined, undefined], // only where a namespace opted in (kubefn-tenant), never cluster-wide
    ["pods", undefined, undefined],
    ["namespaces", undefined, ["get", "list", "create", "update", "delete"]],
    ["events", undefined, ["get", "create", "patch"]],
    ["configmaps", "kubefn-system", ["get", "list", "create", "patch", "delete"]],
    ["deployments", "kubefn-system", ["get", "list", "create", "patch", "delete"]],
  ])("%s (%s): %j", (resource, namespace, verbs) => {
    expect(find(resource, namespace)?.verbs).toEqual(verbs);
  });

  it("leaves out roles bound to others (the relay's, the tenants' aggregated ones)", () => {
    expect(needs.every((n) => !n.role.includes("relay") && !n.role.includes("proxies-edit"))).toBe(true);
    const relay = neededAccess(objects, parseIdentity("kubefn-system/kubefn-relay"));
    expect(new Set(relay.map((n) => n.role))).toEqual(new Set(["ClusterRole kubefn-relay"]));
    expect(new Set(relay.flatMap((n) => n.verbs))).toEqual(new Set(["get", "list", "watch"]));
  });

  it("expects no Secret or Pod access at all from the install: tenants grant it per namespace", () => {
    expect(needs.filter((n) => n.resource === "secrets" || n.resource === "pods")).toEqual([]);
    // What kubefn may grant itself: the SubPool credentials role, by a RoleBinding its admission
    // policy admits only in subpool-* namespaces.
    expect(find("clusterroles")?.verbs).toEqual(["bind"]);
  });

  it("counts cluster-wide grants in a namespace's expectations, not the other way round", () => {
    const namespaced = find("configmaps", "kubefn-system") ?? expect.unreachable();
    const clusterWide = find("configmaps") ?? expect.unreachable();
    expect(excessVerbs(namespaced, needs)).toEqual(["watch", "deletecollection"]);
    expect(excessVerbs(clusterWide, needs)).toEqual(["watch", "patch", "delete", "deletecollection"]);
  });

  it("refuses an identity that is not namespace/name", () => {
    expect(() => parseIdentity("kubefn")).toThrow(/--as must be namespace\/name/);
  });
});

describe("covers", () => {
  it.each<[string, unknown, unknown, boolean]>([
    ["defaults added by the API server", { a: 1, b: { c: 2, d: 3 } }, { b: { c: 2 } }, true],
    ["a value changed", { a: 1 }, { a: 2 }, false],
    ["a field missing", {}, { a: 1 }, false],
    ["a list of other length", { l: [1, 2] }, { l: [1] }, false],
    ["lists element by element", { l: [{ a: 1, x: 0 }] }, { l: [{ a: 1 }] }, true],
  ])("%s", (_, actual, expected, result) => {
    expect(covers(actual, expected)).toBe(result);
  });
});

describe("a dry run's changes", () => {
  const current = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "c", namespace: "n", resourceVersion: "1", managedFields: [{ manager: "a" }] },
    data: { a: "1", b: "2" },
  };

  it.each<[string, unknown, string[]]>([
    [
      "nothing but bookkeeping",
      { ...current, metadata: { ...current.metadata, resourceVersion: "2", managedFields: [] } },
      [],
    ],
    ["a value", { ...current, data: { a: "1", b: "3" } }, [".data.b"]],
    ["a key added and one removed", { ...current, data: { a: "1", c: "3" } }, [".data.b", ".data.c"]],
    ["a list of other length", { ...current, l: [1] }, [".l"]],
  ])("%s", (_, after, fields) => {
    expect(changedFields(current, after)).toEqual(fields);
  });

  it("reports created, changed and unchanged objects and counts them", () => {
    const changes = [
      changeOf("ConfigMap n/new", undefined, current),
      changeOf("ConfigMap n/c", current, { ...current, data: { a: "9", b: "2" } }),
      changeOf("ConfigMap n/c", current, current),
    ];
    expect(report(changes, true)).toBe(
      [
        "created   ConfigMap n/new",
        "changed   ConfigMap n/c: .data.a",
        "unchanged ConfigMap n/c",
        "would be 1 created, 1 changed, 1 unchanged (dry run: nothing was written)",
      ].join("\n"),
    );
  });
});
