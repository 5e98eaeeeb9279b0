/**
 * `kubefn uninstall` end to end, on a devcluster of this file's own (it removes kubefn's CRDs and
 * Namespace, which every other file shares): `kubefn install --platform node --relay` as a user
 * runs it, a Node host reconciling as kubefn's ServiceAccount, a Proxy, a SubPool and a Site with
 * kubefn's finalizers on them; then `kubefn uninstall` deletes them first, waits while kubefn runs
 * their finalizers (the SubPool's Namespace goes too), removes everything else, and finds nothing
 * of kubefn left — checked again here with kubectl. Before that, an object whose finalizer nobody
 * removes: uninstall names it, exits 1, and touches nothing else.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { clusterInfo, type KubectlResult } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const example = (name: string) => readFileSync(`${root}examples/${name}`, "utf8");

let cluster: OwnDevcluster;
let host: HostProcess | undefined;

function kubectl(args: string[], input?: string): Promise<KubectlResult> {
  return outputOf(
    spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", cluster.kubeconfig, ...args]),
    input ?? "",
  );
}

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

function kubefn(...args: string[]) {
  return outputOf(
    spawn(process.execPath, [`${root}cli/kubefn.mjs`, ...args], {
      cwd: root,
      env: { ...process.env, KUBECONFIG: cluster.kubeconfig },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
}

/** What of kubefn the cluster holds: its CRDs, Namespaces, cluster-scoped RBAC and policies. */
async function kubefnLeft(): Promise<string[]> {
  const names = await ok([
    "get",
    "crd,namespace,clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
    "-o",
    "name",
  ]);
  const kubefnCrds = [
    "proxies.crawl.kubefn.dev",
    "subpools.subrelay.example.com",
    "sites.unbounded-cloud.io",
  ];
  return names
    .split("\n")
    .filter(
      (n) =>
        /\/(kubefn|subpool-)/.test(n) ||
        kubefnCrds.some((c) => n.endsWith(`/${c}`)) ||
        n.endsWith("/machines.unbounded-cloud.io"),
    );
}

const finalizers = (args: string[]) => ok([...args, "-o", "jsonpath={.metadata.finalizers}"]);

beforeAll(async () => {
  cluster = await startOwnDevcluster([]);
  const installed = await kubefn("install", "--platform", "node", "--relay");
  expect(installed.code, installed.stderr).toBe(0);
  // The host outside the cluster here (the devcluster runs no image), as kubefn's ServiceAccount.
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(cluster.kubeconfig),
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_MIN_REPORT_SECONDS: "1",
  });
}, 240_000);

afterAll(async () => {
  if (host) expect(await host.stop()).toBe(0);
  await cluster?.close();
}, 60_000);

describe("kubefn uninstall", () => {
  it("names an object whose finalizer does not come off, exits 1, and removes nothing else", async () => {
    await ok(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { name: "held", namespace: "default", finalizers: ["example.com/held"] },
        spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" } },
      }),
    );
    const r = await kubefn("uninstall", "--timeout", "3");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^hanging {3}Proxy default\/held \(finalizers: [^)]*example\.com\/held[^)]*\)$/m,
    );
    expect(r.stdout).toMatch(/1 of kubefn's objects still there after 3 s: .* Nothing else was removed/);
    expect(await kubefnLeft()).toEqual(
      expect.arrayContaining([
        "customresourcedefinition.apiextensions.k8s.io/proxies.crawl.kubefn.dev",
        "namespace/kubefn-system",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-writes-only-its-own",
      ]),
    );
    expect(await ok(["-n", "kubefn-system", "get", "deployment", "kubefn-relay", "-o", "name"])).toBe(
      "deployment.apps/kubefn-relay",
    );
    // Whoever set the finalizer takes it off; kubefn's own comes off with its pass.
    await ok([
      "patch",
      "proxy",
      "held",
      "-n",
      "default",
      "--type=json",
      "-p",
      JSON.stringify([{ op: "replace", path: "/metadata/finalizers", value: [] }]),
    ]);
    await eventually("held Proxy gone", async () =>
      (await kubectl(["get", "proxy", "held", "-n", "default"])).code !== 0 ? true : undefined,
    );
  });

  it("deletes a Proxy, a SubPool and a Site first, while kubefn runs their finalizers, then the rest; nothing is left", async () => {
    await ok(["apply", "-f", "-"], example("proxy-external.yaml"));
    await ok(["apply", "-f", "-"], example("subpool-internal.yaml"));
    await ok(["apply", "-f", "-"], example("site.yaml"));
    // kubefn's first pass on each puts its finalizer on.
    for (const args of [
      ["get", "proxy", "local", "-n", "default"],
      ["get", "subpool", "demo-pool"],
      ["get", "site", "lab"],
    ]) {
      await eventually(`${args.slice(1).join(" ")} has kubefn's finalizer`, async () =>
        (await finalizers(args)).length > 2 ? true : undefined,
      );
    }
    await eventually("the SubPool's Namespace", async () =>
      (await kubectl(["get", "namespace", "subpool-demo-pool"])).code === 0 ? true : undefined,
    );
    expect((await kubefnLeft()).length).toBeGreaterThan(10);

    const r = await kubefn("uninstall", "--timeout", "120");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    // Its objects first, gone before anything else is deleted.
    const gone = lines.findIndex((l) => /^gone {6}3 of kubefn's objects/.test(l));
    expect(gone).toBeGreaterThan(0);
    expect(lines.slice(0, gone).sort()).toEqual([
      "deleted   Proxy default/local",
      "deleted   Site lab",
      "deleted   SubPool demo-pool",
    ]);
    const after = lines.slice(gone + 1);
    const at = (line: string) => {
      const i = after.indexOf(line);
      expect(i, line).toBeGreaterThanOrEqual(0);
      return i;
    };
    // The host and the relay, then kubefn's access, then its containment, then the CRDs.
    expect(at("deleted   Deployment kubefn-system/kubefn-relay")).toBeLessThan(
      at("deleted   ClusterRoleBinding kubefn-proxy"),
    );
    expect(at("deleted   ClusterRoleBinding kubefn-proxy")).toBeLessThan(
      at("deleted   ValidatingAdmissionPolicy kubefn-writes-only-its-own"),
    );
    expect(at("deleted   ValidatingAdmissionPolicy kubefn-writes-only-its-own")).toBeLessThan(
      at("deleted   Namespace kubefn-system"),
    );
    expect(at("deleted   Namespace kubefn-system")).toBeLessThan(
      at("deleted   CustomResourceDefinition proxies.crawl.kubefn.dev"),
    );
    expect(lines.at(-1)).toMatch(/^nothing of kubefn is left: \d+ objects removed$/);
    expect(await kubefnLeft()).toEqual([]);
    // A second run finds nothing to do and says so.
    const again = await kubefn("uninstall", "--timeout", "10");
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe("nothing of kubefn is left: 0 objects removed");
  }, 240_000);
});
