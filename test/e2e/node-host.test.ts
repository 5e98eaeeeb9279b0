/**
 * The Node host end to end, as a separate process, against real control planes: the quick start
 * with its own devcluster and the real audit webhook; and, against the run's shared devcluster,
 * convergence with every event lost, a host killed mid-pass, and duplicated or reordered events.
 */

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectCluster } from "../../functions/node/cluster.ts";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { bindTenantAccessClusterWide, optInNamespace } from "../../functions/node/install.ts";
import { signBatch } from "../../shared/auth/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { ownerTagKey } from "../../shared/controllers/proxy/providers/provider.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { createKube, findCondition, isNotFound, listAll, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { sweepBucket } from "../../shared/runtime/sweep/index.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type ChildOutput, outputOf } from "../support/child-output.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type ProxyObject = KubeObject & {
  status?: { ip?: string; phase?: string; providerID?: string; conditions?: Array<Record<string, string>> };
};

/** The devcluster's own kubectl against `kubeconfig`, as the README tells a user to run it. */
function runKubectl(kubeconfig: string, args: string[]): Promise<ChildOutput> {
  return outputOf(spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", kubeconfig, ...args]));
}

function adminKube(kubeconfig: string): Kube {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return createKube(createNodeTransport(kc));
}

const external = (namespace: string, name: string, port = 3128): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "External", endpoint: { host: "127.0.0.1", port, scheme: "http" } },
});

const managed = (namespace: string, name: string): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config\n" } },
});

function provisioned(p: ProxyObject | undefined): boolean {
  return findCondition(p?.status?.conditions as never, "Provisioned")?.status === "True";
}

/** The namespaces made on the shared devcluster, removed at the end (see its afterAll). */
const namespaces: string[] = [];

async function newNamespace(kube: Kube, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString("hex")}`;
  namespaces.push(name);
  await kube.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  await optInNamespace(kube, name);
  return name;
}

async function podsOf(kube: Kube, namespace: string, uid: string): Promise<KubeObject[]> {
  return listAll(kube, Resources.Pod, { namespace, labelSelector: `${ownerTagKey}=${uid}` });
}

/**
 * A copy of the Site operator's embedded manifests with one default of machina's config changed:
 * what a user hands the Node host as `SITE_MANIFESTS_DIR` to run their own components' manifests.
 */
function siteManifestsDir(marker: string): string {
  const dir = mkdtempSync(join(tmpdir(), "kubefn-site-manifests-"));
  const components = new URL("../../shared/controllers/site/components/", import.meta.url);
  copyFileSync(fileURLToPath(new URL("net.yaml", components)), join(dir, "net.yaml"));
  const machina = readFileSync(fileURLToPath(new URL("machina.yaml", components)), "utf8");
  const edited = machina.replace(
    "  log-level: info\n",
    `  log-level: info\n  from-manifests-dir: "${marker}"\n`,
  );
  if (edited === machina) throw new Error("machina.yaml no longer holds the line this test edits");
  writeFileSync(join(dir, "machina.yaml"), edited);
  return dir;
}

describe("npm start on a fresh machine (its own devcluster, the real audit webhook)", () => {
  let host: HostProcess;
  let kube: Kube;
  const marker = randomBytes(4).toString("hex");
  const manifests = siteManifestsDir(marker);

  beforeAll(async () => {
    // Sweeps (and so health probes) every 2 s, but a drift pass per object only once a day, in a
    // minute bucket the test checks is not the current one: only the audit webhook can bring the
    // first pass of a new object.
    host = await startHost({
      KUBEFN_SWEEP_SECONDS: "2",
      KUBEFN_PROXY_RESYNC_SECONDS: "86400",
      SITE_MANIFESTS_DIR: manifests,
    });
    const up = await host.waitFor((l) => l.msg === "cluster up");
    kube = adminKube(String(up.kubeconfig));
  }, 240_000);

  afterAll(async () => {
    rmSync(manifests, { recursive: true, force: true });
    const code = await host?.stop("SIGINT");
    expect(code).toBe(0);
    expect(host.lines.some((l) => l.msg === "stopped")).toBe(true);
  }, 60_000);

  it("SITE_MANIFESTS_DIR: a Site's components apply the manifests of that directory, not the embedded ones", async () => {
    await kube.create(siteResource, {
      apiVersion: "unbounded-cloud.io/v1alpha3",
      kind: "Site",
      metadata: { name: "from-dir" },
      spec: {},
    });
    const config = await eventually("machina-config from the directory", async () => {
      try {
        const cm = await kube.get(Resources.ConfigMap, {
          namespace: "kubefn-system",
          name: "machina-config",
        });
        return (cm.data as Record<string, string> | undefined)?.["from-manifests-dir"] ? cm : undefined;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    });
    expect((config.data as Record<string, string>)["from-manifests-dir"]).toBe(marker);
    await kube.delete(siteResource, { name: "from-dir" });
  });

  it("prints what it is doing: cluster up, CRDs and RBAC installed, identity, listening", () => {
    const msgs = host.lines.map((l) => l.msg);
    for (const m of [
      "cluster up",
      "CRDs and RBAC installed",
      "reconciling as system:serviceaccount:kubefn-system:kubefn",
      "listening",
    ]) {
      expect(msgs).toContain(m);
    }
  });

  it("a Proxy created with the admin reaches a pass through the audit webhook and converges", async () => {
    const created = await kube.create(proxyResource, external("default", "quickstart"));
    const minuteBucket = () => Math.floor(Date.now() / 60_000) % 1440;
    const bucketAtCreate = minuteBucket();
    expect(sweepBucket(created.metadata.uid!, 1440)).not.toBe(bucketAtCreate);
    const p = await eventually("Provisioned=True", async () => {
      const got = await kube.get<ProxyObject>(proxyResource, { namespace: "default", name: "quickstart" });
      return provisioned(got) ? got : undefined;
    });
    expect(p.status?.ip).toBe("127.0.0.1");
    const pass = await host.waitFor((l) => l.msg === "pass" && l.key === "proxy/default/quickstart");
    expect(pass.result).toBeDefined();
    expect(sweepBucket(created.metadata.uid!, 1440)).not.toBe(minuteBucket());
  });

  it("the README walk-through: kubectl apply the example, watch it become Ready", async () => {
    // The example's forward proxy and probe target, as scripts/forward-proxy.ts would start them.
    const proxy = await startForwardProxy({ host: "127.0.0.1", port: 3128 });
    const target = await startHttpTarget({ host: "127.0.0.1", port: 8081 });
    try {
      const kubeconfig = String((await host.waitFor((l) => l.msg === "cluster up")).kubeconfig);
      const kubectl = (args: string[]) => runKubectl(kubeconfig, args);
      const applied = await kubectl([
        "apply",
        "-f",
        fileURLToPath(new URL("../../examples/proxy-external.yaml", import.meta.url)),
      ]);
      expect(applied.stdout).toContain("proxy.crawl.kubefn.dev/local created");
      await eventually(
        "phase Ready",
        async () => {
          const r = await kubectl([
            "get",
            "proxy",
            "local",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.phase}",
          ]);
          return r.stdout === "Ready" ? true : undefined;
        },
        90_000,
      );
      const table = await kubectl(["get", "proxies", "-n", "default"]);
      expect(table.stdout).toMatch(/NAME\s+MODE\s+PHASE\s+IP/);
      expect(table.stdout).toMatch(/local\s+External\s+Ready\s+127\.0\.0\.1/);
      expect(proxy.requests.length).toBeGreaterThan(0);
    } finally {
      await proxy.close();
      await target.close();
    }
  });
});

describe("npm start with bad settings", () => {
  /** main.ts as `npm start` runs it, to its exit. */
  function runMain(env: Record<string, string>): Promise<ChildOutput> {
    return outputOf(
      spawn(process.execPath, ["--import", "tsx", "functions/node/main.ts"], {
        cwd: fileURLToPath(new URL("../..", import.meta.url)),
        env: { PATH: process.env.PATH ?? "", ...env },
      }),
    );
  }

  it("names every bad variable, one a line, with no stack, and exits 2", async () => {
    const { code, stderr } = await runMain({
      KUBEFN_PORT: "eighty",
      AUDIT_TOKEN: "short",
      SWEEP_PERIOD_SECONDS: "0",
    });
    expect(code).toBe(2);
    const lines = stderr.trim().split("\n");
    expect(lines[0]).toBe("kubefn: invalid environment:");
    expect(
      lines
        .slice(1)
        .map((l) => l.trim().split(":")[0])
        .sort(),
    ).toEqual(["AUDIT_TOKEN", "KUBEFN_PORT", "SWEEP_PERIOD_SECONDS"]);
  });

  it("says in one line why it could not start (a kubeconfig that is not there), and exits 1", async () => {
    const { code, stdout, stderr } = await runMain({
      KUBECONFIG: "/nonexistent/kubeconfig",
      KUBEFN_PORT: "0",
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(/error start failed error="ENOENT[^\n]*\/nonexistent\/kubeconfig/);
    expect(stderr).not.toMatch(/^\s+at /m);
  });
});

describe("the Node host on the shared devcluster", () => {
  let admin: Kube;
  let sa: string;

  beforeAll(async () => {
    admin = adminKube(clusterInfo().kubeconfig);
    sa = await functionsKubeconfig(clusterInfo().kubeconfig);
  }, 120_000);

  // Each test's host is stopped at its end (one never sweeps): one more host, sweeping, takes the
  // Managed Proxies' finalizers off while their namespaces go.
  afterAll(async () => {
    if (namespaces.length === 0) return;
    const host = await startHost({
      KUBECONFIG: sa,
      KUBEFN_SWEEP_SECONDS: "1",
      KUBEFN_PROXY_RESYNC_SECONDS: "60",
    });
    try {
      await removeNamespaces(admin, namespaces);
    } finally {
      expect(await host.stop()).toBe(0);
    }
  }, 240_000);

  it("says whom a given kubeconfig reconciles as, and warns when it is not kubefn's identity", async () => {
    const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];
    const log = {
      info: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "info", msg, fields }),
      warn: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "warn", msg, fields }),
      error: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "error", msg, fields }),
    };
    const connect = (kubeconfig: string) =>
      connectCluster(parseNodeHostEnv({ KUBECONFIG: kubeconfig }), "http://127.0.0.1:1", undefined, log);
    await connect(sa);
    expect(lines).toEqual([
      { level: "info", msg: "reconciling as system:serviceaccount:kubefn-system:kubefn" },
    ]);
    lines.length = 0;
    // A platform engineer's own kubeconfig: kubefn would write as them, unchecked by the policy.
    await connect(clusterInfo().kubeconfig);
    expect(lines[0]?.msg).toMatch(/^reconciling as (?!system:serviceaccount:kubefn-system:kubefn$)/);
    expect(lines[1]).toMatchObject({ level: "warn", msg: expect.stringContaining("not in SELF_USERNAMES") });
  });

  it("refuses to start when kubefn's identity may read kubefn's own Secrets (kubefn-tenant bound cluster-wide)", async () => {
    const log = { info: () => {}, warn: () => {}, error: () => {} };
    const connect = () =>
      connectCluster(parseNodeHostEnv({ KUBECONFIG: sa }), "http://127.0.0.1:1", undefined, log);
    await bindTenantAccessClusterWide(admin);
    try {
      await expect(connect()).rejects.toThrow(
        /^kubefn's identity may get the Secrets of kubefn-system, kubefn's own .*; not starting$/,
      );
    } finally {
      await admin.delete(Resources.ClusterRoleBinding, { name: "kubefn-tenant" });
    }
    // RBAC answers the next review without the binding: the same host starts.
    await eventually("the host to connect once the binding is gone", () =>
      connect().then(
        () => true,
        () => undefined,
      ),
    );
  });

  it("converges every object with all events lost, through the sweep alone", async () => {
    const ns = await newNamespace(admin, "lost");
    const host = await startHost({
      KUBECONFIG: sa,
      KUBEFN_SWEEP_SECONDS: "2",
      KUBEFN_PROXY_RESYNC_SECONDS: "60",
    });
    try {
      const names = ["a", "b", "c", "d", "e"];
      for (const n of names) await admin.create(proxyResource, external(ns, n));
      await eventually("all five Provisioned", async () => {
        const items = await listAll<ProxyObject>(admin, proxyResource, { namespace: ns });
        return items.length === 5 && items.every(provisioned) ? items : undefined;
      });
      // Nothing but the sweep brought these passes: the host has no intake credentials at all.
      expect(host.lines.some((l) => l.msg === "sweep")).toBe(true);
    } finally {
      expect(await host.stop()).toBe(0);
    }
  });

  it("a host killed mid-pass and started again converges, leaving exactly one instance", async () => {
    const ns = await newNamespace(admin, "killed");
    const env = { KUBECONFIG: sa, KUBEFN_SWEEP_SECONDS: "2", KUBEFN_PROXY_RESYNC_SECONDS: "60" };
    const first = await startHost(env);
    const created = await admin.create<ProxyObject>(proxyResource, managed(ns, "m1"));
    await first.waitFor((l) => l.msg === "pass" && l.key === `proxy/${ns}/m1`);
    await first.stop("SIGKILL");

    const second = await startHost(env);
    try {
      const p = await eventually(
        "the restarted host provisions m1",
        async () => {
          const got = await admin.get<ProxyObject>(proxyResource, { namespace: ns, name: "m1" });
          return provisioned(got) ? got : undefined;
        },
        90_000,
      );
      expect(p.status?.ip).toMatch(/^127\./);
      expect(await podsOf(admin, ns, created.metadata.uid!)).toHaveLength(1);
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });

  it("duplicated and reordered relay events change nothing beyond one pass per object", async () => {
    const ns = await newNamespace(admin, "dup");
    const secret = randomBytes(24).toString("hex");
    // No sweep during the test: only the relay batches drive passes.
    const host = await startHost({
      KUBECONFIG: sa,
      KUBEFN_RELAY_SECRET: secret,
      KUBEFN_SWEEP_SECONDS: "3600",
    });
    try {
      const objs: ProxyObject[] = [];
      for (const n of ["x", "y", "z"])
        objs.push(await admin.create<ProxyObject>(proxyResource, managed(ns, n)));
      const event = (o: ProxyObject, generation: number) => ({
        type: "MODIFIED",
        resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" },
        object: { metadata: { ...o.metadata, generation } },
      });
      // Each object three times, newest first, interleaved, and the whole batch sent twice.
      const events = [3, 1, 2].flatMap((g) => objs.map((o) => event(o, g))).reverse();
      const body = JSON.stringify({ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events });
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${host.url}/v1/events`, {
          method: "POST",
          body,
          headers: {
            "content-type": "application/json",
            // A re-send is signed anew (one second later); the very same signature is a replay.
            ...(await signBatch(secret, body, Date.now() / 1000 + i)),
          },
        });
        expect(res.status).toBe(202);
        expect(((await res.json()) as { enqueued: number }).enqueued).toBe(3);
      }
      for (const o of objs) {
        await eventually(`${o.metadata.name} provisioned`, async () => {
          const got = await admin.get<ProxyObject>(proxyResource, { namespace: ns, name: o.metadata.name! });
          return provisioned(got) ? got : undefined;
        });
        expect(await podsOf(admin, ns, o.metadata.uid!)).toHaveLength(1);
      }
    } finally {
      expect(await host.stop()).toBe(0);
    }
  });

  it("deleting a Managed Proxy removes its Pod before the finalizer goes", async () => {
    const ns = await newNamespace(admin, "del");
    const host = await startHost({
      KUBECONFIG: sa,
      KUBEFN_SWEEP_SECONDS: "1",
      KUBEFN_PROXY_RESYNC_SECONDS: "60",
    });
    try {
      const p = await admin.create<ProxyObject>(proxyResource, managed(ns, "gone"));
      await eventually("provisioned", async () => {
        const got = await admin.get<ProxyObject>(proxyResource, { namespace: ns, name: "gone" });
        return provisioned(got) ? got : undefined;
      });
      await admin.delete(proxyResource, { namespace: ns, name: "gone" });
      await eventually(
        "the Proxy is gone",
        async () => {
          try {
            const still = await admin.get<ProxyObject>(proxyResource, { namespace: ns, name: "gone" });
            // While the Proxy still exists, its finalizer must still be there if the Pod is.
            const pods = await podsOf(admin, ns, p.metadata.uid!);
            if (pods.length > 0) expect(still.metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
            return undefined;
          } catch (err) {
            if (isNotFound(err)) return true;
            throw err;
          }
        },
        90_000,
      );
      expect(await podsOf(admin, ns, p.metadata.uid!)).toHaveLength(0);
    } finally {
      expect(await host.stop()).toBe(0);
    }
  });
});
