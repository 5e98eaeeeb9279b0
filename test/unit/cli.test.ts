/**
 * The `kubefn` command's pure decisions: what kubefn's identity needs (derived from infra/rbac),
 * what it must not have on top, whether an installed object covers the release's, what a dry
 * run changed, and what an install profile (`--platform`, `--relay`) holds and says to do next.
 * The cluster side is test/integration/cli.test.ts and test/integration/uninstall.test.ts.
 */

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../cli/cluster.ts";
import {
  covers,
  excessVerbs,
  fleetNames,
  formatFleetChecks,
  neededAccess,
  parseIdentity,
  unreachable,
} from "../../cli/doctor.ts";
import { changedFields, changeOf, report } from "../../cli/install.ts";
import {
  IN_CLUSTER_INTAKE_URL,
  installChoice,
  intakeSecretKeys,
  nextSteps,
  usernameList,
} from "../../cli/profile.ts";
import { uninstallObjects } from "../../cli/uninstall.ts";
import { inClusterIntakeUrl, installObjects, objectKey, profileObjects } from "../../install/index.ts";
import { tempDir } from "../support/temp-dir.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const objects = [
  ...installObjects(root, "0.0.0"),
  ...profileObjects(root, "0.0.0", { host: false, relay: { intakeUrl: inClusterIntakeUrl } }).slice(
    installObjects(root, "0.0.0").length,
  ),
] as KubeObject[];
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

  it("grants nothing of a pool's kinds cluster-wide: ConfigMaps only in kubefn-system (the Site's Role)", () => {
    for (const resource of ["configmaps", "statefulsets", "services", "serviceaccounts", "networkpolicies"])
      expect(find(resource), resource).toBeUndefined();
  });

  it("counts cluster-wide grants in a namespace's expectations, not the other way round", () => {
    const grants: Parameters<typeof excessVerbs>[1] = [
      { group: "", resource: "configmaps", verbs: ["get", "list"], role: "ClusterRole a" },
      { group: "", resource: "configmaps", namespace: "kubefn-system", verbs: ["create"], role: "Role b" },
    ];
    const [clusterWide, namespaced] = grants as [(typeof grants)[0], (typeof grants)[0]];
    expect(excessVerbs(namespaced, grants)).toEqual([
      "watch",
      "update",
      "patch",
      "delete",
      "deletecollection",
    ]);
    expect(excessVerbs(clusterWide, grants)).toEqual([
      "watch",
      "create",
      "update",
      "patch",
      "delete",
      "deletecollection",
    ]);
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

describe("install profiles", () => {
  const keys = (o: { kind: string; metadata: { name: string; namespace?: string } }[]) => o.map(objectKey);
  const clusterSide = installObjects(root, "0.0.0");
  const processes = (profile: Parameters<typeof profileObjects>[2]) =>
    profileObjects(root, "0.0.0", profile)
      .filter((o) => o.kind === "Deployment")
      .map((o) => o.metadata.name);

  it("install.yaml (the cluster side) runs no process: a Worker's or Lambda's cluster gets no second reconciler", () => {
    expect(
      clusterSide.filter((o) => ["Deployment", "StatefulSet", "DaemonSet", "Pod"].includes(o.kind)),
    ).toEqual([]);
    expect(new Set(clusterSide.map((o) => o.kind))).toEqual(
      new Set([
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
      ]),
    );
  });

  it("the host profile ships a NetworkPolicy: intake's port open, /metrics on a port of its own for the scraper's namespace alone (issue 30, Low)", () => {
    const host = profileObjects(root, "0.0.0", { host: true });
    const policy = host.find((o) => o.kind === "NetworkPolicy") as
      | { metadata: { name: string; namespace: string }; spec: Record<string, unknown> }
      | undefined;
    expect(policy?.metadata).toMatchObject({ name: "kubefn", namespace: "kubefn-system" });
    expect(policy?.spec).toEqual({
      podSelector: { matchLabels: { "app.kubernetes.io/name": "kubefn" } },
      policyTypes: ["Ingress"],
      ingress: [
        { ports: [{ protocol: "TCP", port: 8080 }] },
        {
          from: [{ namespaceSelector: { matchLabels: { "metrics.kubefn.dev/scraper": "true" } } }],
          ports: [{ protocol: "TCP", port: 9090 }],
        },
      ],
    });
    const deployment = host.find(
      (o) => o.kind === "Deployment" && o.metadata.name === "kubefn",
    ) as unknown as {
      spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
    };
    const env = deployment.spec.template.spec.containers[0]?.env ?? [];
    expect(env).toContainEqual({ name: "KUBEFN_METRICS_PORT", value: "9090" });
    expect(env.map((e) => e.name)).not.toContain("KUBEFN_METRICS_PER_OBJECT");
    // The cluster side alone (a Worker's or Lambda's cluster) has no host to guard.
    expect(clusterSide.filter((o) => o.kind === "NetworkPolicy")).toEqual([]);
  });

  it.each<[string, Parameters<typeof profileObjects>[2], string[]]>([
    ["serverless, an audit webhook", { host: false }, []],
    [
      "serverless, the relay",
      { host: false, relay: { intakeUrl: "https://k.example/v1/events" } },
      ["kubefn-relay"],
    ],
    ["the in-cluster host, an audit webhook", { host: true }, ["kubefn"]],
    [
      "the in-cluster host and the relay",
      { host: true, relay: { intakeUrl: inClusterIntakeUrl } },
      ["kubefn", "kubefn-relay"],
    ],
  ])("%s", (_, profile, deployments) => {
    expect(processes(profile)).toEqual(deployments);
    expect(keys(profileObjects(root, "0.0.0", profile)).slice(0, clusterSide.length)).toEqual(
      keys(clusterSide),
    );
  });

  it("the relay posts where it is told, signed with the in-cluster host's relay-secret, never a placeholder", () => {
    const relay = profileObjects(root, "1.2.3", {
      host: false,
      relay: { intakeUrl: "https://k.example/v1/events" },
    });
    const text = JSON.stringify(relay);
    expect(text).not.toContain("example.com/v1/events");
    const env = (
      relay.find((o) => o.kind === "Deployment") as unknown as {
        spec: { template: { spec: { containers: { image: string; env: Record<string, unknown>[] }[] } } };
      }
    ).spec.template.spec.containers[0];
    expect(env?.image).toBe("ghcr.io/kubefn/relay:1.2.3");
    expect(env?.env).toContainEqual({ name: "KUBEFN_INTAKE_URL", value: "https://k.example/v1/events" });
    expect(env?.env).toContainEqual({
      name: "KUBEFN_RELAY_SECRET",
      valueFrom: { secretKeyRef: { name: "kubefn-intake", key: "relay-secret" } },
    });
    // The host reads the same key of the same Secret.
    expect(JSON.stringify(profileObjects(root, "1.2.3", { host: true }))).toContain(
      '"name":"KUBEFN_RELAY_SECRET","valueFrom":{"secretKeyRef":{"name":"kubefn-intake","key":"relay-secret"',
    );
    expect(inClusterIntakeUrl).toBe(IN_CLUSTER_INTAKE_URL);
  });

  it.each<[string, Parameters<typeof installChoice>[0], ReturnType<typeof installChoice>]>([
    ["nothing: the cluster side", {}, {}],
    ["a Worker, audit webhook", { platform: "cloudflare" }, { platform: "cloudflare" }],
    ["the host", { platform: "node" }, { platform: "node" }],
    [
      "the host and the relay: its Service",
      { platform: "node", relay: true },
      { platform: "node", relayIntakeUrl: IN_CLUSTER_INTAKE_URL },
    ],
    [
      "a Worker and the relay",
      { platform: "cloudflare", relay: true, intakeUrl: "https://kubefn.example.workers.dev/v1/events" },
      { platform: "cloudflare", relayIntakeUrl: "https://kubefn.example.workers.dev/v1/events" },
    ],
    [
      "a Worker's relay without a URL",
      { platform: "cloudflare", relay: true },
      { error: "--relay needs --intake-url <kubefn's https://…/v1/events>" },
    ],
    [
      "a URL without the relay",
      { platform: "aws", intakeUrl: "https://x/v1/events" },
      { error: "--intake-url is the relay's: add --relay" },
    ],
    [
      "an unknown platform",
      { platform: "gke" },
      { error: "--platform must be one of node, cloudflare, aws, not gke" },
    ],
    [
      "plain http to a Service by its full name",
      { relay: true, intakeUrl: "http://kubefn.kubefn-system.svc.cluster.local:8080/v1/events" },
      { relayIntakeUrl: "http://kubefn.kubefn-system.svc.cluster.local:8080/v1/events" },
    ],
    [
      "plain http out of the cluster",
      { platform: "aws", relay: true, intakeUrl: "http://kubefn.example.com/v1/events" },
      {
        error:
          "--intake-url http://kubefn.example.com/v1/events: the relay posts over https (plain http only to a Service in the cluster)",
      },
    ],
  ])("%s", (_, given, expected) => {
    expect(installChoice(given)).toEqual(expected);
  });

  it("says what to do next, the relay's secret never printed", () => {
    const ids = {
      list: ["system:serviceaccount:kubefn-system:kubefn", "kubefn-oidc:kubefn"],
      from: "the cluster's admission policies",
    };
    const worker = nextSteps(
      { platform: "cloudflare", relayIntakeUrl: "https://w.example/v1/events" },
      ids,
    ).join("\n");
    expect(worker).toContain(
      "kubefn's identities (SELF_USERNAMES, the cluster's admission policies): system:serviceaccount:kubefn-system:kubefn, kubefn-oidc:kubefn",
    );
    expect(worker).toContain("| npx wrangler secret put RELAY_SECRET");
    expect(
      nextSteps({ platform: "aws", relayIntakeUrl: "https://l.example/v1/events" }, ids).join("\n"),
    ).toContain("RelaySecretArn");
    expect(nextSteps({ platform: "node" }, ids).join("\n")).toContain("install with --relay");
    expect(nextSteps({ platform: "cloudflare" }, ids).join("\n")).toContain(
      "openssl rand -hex 32 | npx wrangler secret put STATUS_SEAL_KEY",
    );
  });

  it("makes the in-cluster host's status seal key, so that it is never derived from a channel's secret (issue 30, Low)", () => {
    expect(intakeSecretKeys({ platform: "node" })).toEqual(["status-seal-key"]);
    expect(
      intakeSecretKeys({
        platform: "node",
        relayIntakeUrl: "http://kubefn.kubefn-system.svc:8080/v1/events",
      }),
    ).toEqual(["relay-secret", "status-seal-key"]);
    // A Worker's or Lambda's key lives on that platform, not in the cluster.
    expect(
      intakeSecretKeys({ platform: "cloudflare", relayIntakeUrl: "https://w.example/v1/events" }),
    ).toEqual(["relay-secret"]);
    expect(intakeSecretKeys({})).toEqual([]);
  });

  it("reads SELF_USERNAMES as the settings do", () => {
    expect(usernameList(" a, b ,,c ")).toEqual(["a", "b", "c"]);
  });

  it("uninstall knows every object of every profile", () => {
    const all = keys(uninstallObjects(root, "0.0.0"));
    for (const profile of [{ host: true, relay: { intakeUrl: inClusterIntakeUrl } }]) {
      expect(keys(profileObjects(root, "0.0.0", profile)).filter((k) => !all.includes(k))).toEqual([]);
    }
  });
});

describe("kubefn doctor --clusters (issue 35)", () => {
  it.each([
    ["east,west", ["east", "west"]],
    [" east , west,", ["east", "west"]],
  ])("names %j: the kubeconfig contexts %j", (value, names) => {
    expect(fleetNames(value)).toEqual({ names });
  });

  it.each([
    ["", /at least one/],
    ["east,east", /twice/],
    ["@/nonexistent/clusters.json", /ENOENT/],
  ])("refuses %j", (value, error) => {
    expect(fleetNames(value)).toEqual({ error: expect.stringMatching(error) });
  });

  it("@file: the names a KUBEFN_CLUSTERS file declares, validated as the host validates it", () => {
    const dir = tempDir("kubefn-doctor-").path;
    const good = join(dir, "clusters.json");
    writeFileSync(
      good,
      JSON.stringify([
        { name: "east", credential: { kind: "kubeconfig", file: "/k/east" } },
        { name: "west", server: "https://west.example.com", credential: { kind: "token", token: "t" } },
      ]),
    );
    expect(fleetNames(`@${good}`)).toEqual({ names: ["east", "west"] });
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify([{ name: "East!", credential: { kind: "in-cluster" } }]));
    expect(fleetNames(`@${bad}`)).toEqual({ error: expect.stringMatching(/DNS label/) });
  });

  it("reports each cluster under its name with its own summary, and names the clusters that are not ready", () => {
    const report = formatFleetChecks([
      { cluster: "east", checks: [{ ok: true, what: "CRDs installed" }] },
      {
        cluster: "west",
        checks: [
          { ok: true, what: "CRDs installed" },
          { ok: false, what: "no intake", fix: "run the relay" },
        ],
      },
      { cluster: "gone", checks: [unreachable("gone", new Error("connect ECONNREFUSED 127.0.0.1:9"))] },
    ]);
    expect(report.ok).toBe(false);
    expect(report.text.split("\n\n")).toEqual([
      "cluster east\nok   CRDs installed\neast: all 1 checks passed",
      "cluster west\nok   CRDs installed\nfail no intake — run the relay\nwest: 1 of 2 checks failed",
      expect.stringMatching(
        /^cluster gone\nfail cannot check cluster gone: connect ECONNREFUSED .* — check that your kubeconfig has a context named gone/,
      ),
      "3 clusters: 1 ready, 2 not (west, gone)",
    ]);
    expect(formatFleetChecks([{ cluster: "east", checks: [{ ok: true, what: "x" }] }]).ok).toBe(true);
  });
});
