/**
 * `kubefn uninstall` end to end, on a devcluster of this file's own (it removes kubefn's CRDs and
 * Namespace, which every other file shares): `kubefn install --platform node --relay` as a user
 * runs it, a Node host reconciling as kubefn's ServiceAccount, a Managed Proxy and a SubPool with
 * kubefn's finalizers on them and a Ready Site; then `kubefn uninstall` deletes them first, waits
 * while kubefn runs their finalizers (the Proxy's Pod and the SubPool's Namespace go too), removes everything else, and finds nothing
 * of kubefn left — checked again here with kubectl. Before that, an object whose finalizer nobody
 * removes: uninstall names it, exits 1, and touches nothing else.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultRelayKinds } from "../../infra/relay/main.ts";
import { createRelay, type Relay } from "../../infra/relay/relay.ts";
import { clientNodeWatchStream } from "../../infra/relay/watch-stream.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { clusterInfo, type KubectlResult } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const example = (name: string) => readFileSync(`${root}examples/${name}`, "utf8");

let cluster: OwnDevcluster;
let host: HostProcess | undefined;
let relay: Relay | undefined;

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
  // The host outside the cluster here (the devcluster runs no image), as kubefn's ServiceAccount,
  // and the relay in this process in place of install.yaml's (its Pod runs no image either),
  // signing with the relay-secret `kubefn install --relay` made.
  const secret = Buffer.from(
    await ok([
      "-n",
      "kubefn-system",
      "get",
      "secret",
      "kubefn-intake",
      "-o",
      "jsonpath={.data.relay-secret}",
    ]),
    "base64",
  ).toString();
  expect(secret).toMatch(/^[0-9a-f]{64}$/);
  host = await startHost({
    KUBEFN_RELAY_SECRET: secret,
    KUBECONFIG: await functionsKubeconfig(cluster.kubeconfig),
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_MIN_REPORT_SECONDS: "1",
    // The example Proxy's endpoint is on loopback, as on `npm start`'s embedded devcluster.
    KUBEFN_PROBE_ALLOWED_CIDRS: "127.0.0.0/8",
  });
  const kc = loadKubeConfig({ file: cluster.kubeconfig });
  relay = createRelay({
    kinds: defaultRelayKinds(),
    kube: createKube(createNodeTransport(kc)),
    stream: clientNodeWatchStream(kc, { timeoutSeconds: 60 }),
    intakeUrl: `${host.url}/v1/events`,
    secret,
    batch: { maxEvents: 50, maxDelayMs: 200 },
    bufferSize: 1000,
    backoff: { baseMs: 200, maxMs: 1000 },
    // Quiet: its watches fail by design once uninstall removes the CRDs.
    log: { info() {}, warn() {}, error() {} },
  });
  relay.start();
  await eventually("relay synced", async () => (relay?.synced() ? true : undefined));
}, 240_000);

afterAll(async () => {
  await relay?.stop();
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
    expect(
      (await ok(["-n", "kubefn-system", "get", "deployment", "kubefn-relay", "-o", "name"])).trim(),
    ).toBe("deployment.apps/kubefn-relay");
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
    // A Managed Proxy (an External one has nothing to clean up, so no finalizer), in a namespace
    // that opted in as its admin does (the RoleBinding uninstall removes too).
    await ok([
      "create",
      "rolebinding",
      "kubefn-tenant",
      "-n",
      "default",
      "--clusterrole=kubefn-tenant",
      "--serviceaccount=kubefn-system:kubefn",
    ]);
    await ok(["apply", "-f", "-"], example("proxy-managed.yaml"));
    await ok(["apply", "-f", "-"], example("subpool-internal.yaml"));
    await ok(["apply", "-f", "-"], example("site.yaml"));
    // kubefn's first pass on the Proxy and the SubPool puts its finalizer on (a Site has none:
    // its components are its dependents, and the garbage collector removes them).
    for (const args of [
      ["get", "proxy", "managed", "-n", "default"],
      ["get", "subpool", "demo-pool"],
    ]) {
      await eventually(`${args.slice(1).join(" ")} has kubefn's finalizer`, async () => {
        if ((await finalizers(args)).length > 2) return true;
        throw new Error(await ok([...args, "-o", "json"]));
      });
    }
    await eventually("the Site reconciled", async () =>
      (await ok(["get", "site", "lab", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])) ===
      "True"
        ? true
        : undefined,
    );
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
      "deleted   Proxy default/managed",
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
    expect(after).toContain("deleted   RoleBinding default/kubefn-tenant");
    expect(lines.at(-1)).toMatch(/^nothing of kubefn is left: \d+ objects removed$/);
    expect((await kubectl(["-n", "default", "get", "rolebinding", "kubefn-tenant"])).code).not.toBe(0);
    expect(await kubefnLeft()).toEqual([]);
    // A second run finds nothing to do and says so.
    const again = await kubefn("uninstall", "--timeout", "10");
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe("nothing of kubefn is left: 0 objects removed");
  }, 240_000);
});
