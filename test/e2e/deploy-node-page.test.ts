/**
 * docs/deploying/node.md walked literally, on a devcluster shaped like production
 * (`--profile production`): the API server alone over TLS with a private CA (no plain-HTTP
 * pass-through), its audit webhook with exactly the flags docs/deploying/README.md gives (so a
 * batch waits up to the API server's default 30 s), ServiceAccount tokens of at most an hour.
 *
 * The page's own commands run with `bash`, in order, in a directory laid out as the release's
 * source (the checkout's folders, linked) with `kubectl` on the PATH: "What every cluster needs"
 * (README.md), the ServiceAccount kubeconfig and the allow-list of "Its identity", then
 * `KUBECONFIG=… KUBEFN_AUDIT_TOKEN=… npm start` with the `…` filled in. A command that fails fails
 * the test. Then the examples' Proxy, SubPool and Site become Ready, reconciled by that host as
 * the ServiceAccount, and are deleted through it (their finalizers run).
 *
 * Beyond the page, the host gets its port (the audit webhook's URL names it before it starts),
 * JSON logs and PROBE_ALLOWED_CIDRS for the loopback probe fixtures.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { unpackRelease, walkPage } from "../support/deploy-page.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { fencedBlocks } from "../support/markdown.ts";
import { freePort } from "../support/oidc-issuer.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import type { TempDir } from "../support/temp-dir.ts";
import { eventually } from "./host.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const everyCluster = readFileSync(`${root}docs/deploying/README.md`, "utf8");
const auditToken = crypto.randomUUID();

let cluster: OwnDevcluster;
let work: TempDir;
let hostPort: number;
let host: ChildProcess | undefined;
let hostLog = "";
let target: Target;
let forwardProxy: ForwardProxy;

const walk = walkPage({
  page: "docs/deploying/node.md",
  workDir: () => work.path,
  kubeconfig: () => cluster.kubeconfig,
});
const { sh, kubectl, blockWith } = walk;

beforeAll(async () => {
  hostPort = await freePort();
  cluster = await startOwnDevcluster([], {
    profile: "production",
    auditWebhook: {
      url: `http://127.0.0.1:${hostPort}/v1/events`,
      token: auditToken,
      policy: `${root}infra/audit/policy.yaml`,
    },
  });
  target = await startHttpTarget();
  forwardProxy = await startForwardProxy();
  // The release's source as a user unpacks it: its folders (linked), nothing else.
  work = unpackRelease("kubefn-node-page-", [
    "package.json",
    "tsconfig.json",
    "node_modules",
    "scripts",
    "functions",
    "shared",
    "infra",
    "examples",
  ]);
}, 180_000);

afterAll(async () => {
  if (host && host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((resolve) => host?.once("exit", resolve));
    // npm start runs the host under npm and bash: the whole group goes.
    if (host.pid) process.kill(-host.pid, "SIGINT");
    const timer = setTimeout(() => host?.pid && process.kill(-host.pid, "SIGKILL"), 20_000);
    await exited;
    clearTimeout(timer);
  }
  await target?.close();
  await forwardProxy?.close();
  await cluster?.close();
  work?.remove();
}, 60_000);

describe("the production-shaped devcluster", () => {
  it("has nothing in front of the API server but TLS with its private CA", async () => {
    expect(cluster.profile).toBe("production");
    expect(cluster.httpProxy).toBe("");
    // Without the CA, TLS to the API server fails: a client must be given it.
    await expect(fetch(`${cluster.server}/version`)).rejects.toThrow();
  });
});

describe("docs/deploying/node.md, literally", () => {
  it("What every cluster needs: the CRDs, the ServiceAccount, its RBAC and admission policies", async () => {
    const m = /`(kubectl apply -f infra\/crds\s+-f infra\/rbac\/)`/.exec(everyCluster);
    expect(m, "README.md names the command").not.toBeNull();
    const out = await sh(m![1]!.replace(/\s+/g, " "));
    expect(out.stdout).toContain("customresourcedefinition.apiextensions.k8s.io/proxies.crawl.kubefn.dev");
    expect(out.stdout).toContain(
      "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-writes-only-its-own",
    );
  });

  it("Its identity: a kubeconfig for the ServiceAccount, whose token the cluster caps at an hour", async () => {
    const block = blockWith("create token kubefn");
    const out = await sh(block);
    // The page's last command, and the output it shows beside it.
    const shown = /kubectl auth whoami\s+#\s*(\S+)/.exec(block)?.[1];
    expect(shown).toBe("system:serviceaccount:kubefn-system:kubefn");
    expect(out.stdout).toContain(shown);
    const kc = parseYaml(readFileSync(join(work.path, "kubefn.kubeconfig"), "utf8")) as {
      clusters: Array<{ cluster: { server: string; "certificate-authority-data"?: string } }>;
      users: Array<{ user: { token: string } }>;
    };
    expect(kc.clusters[0]?.cluster.server).toBe(cluster.server);
    expect(kc.clusters[0]?.cluster["certificate-authority-data"]).toBeTruthy();
    // The page asks for 24 hours; a production API server gives at most one.
    const claims = JSON.parse(
      Buffer.from(kc.users[0]!.user.token.split(".")[1]!, "base64url").toString("utf8"),
    ) as { iat: number; exp: number };
    expect(claims.exp - claims.iat).toBe(3600);
  });

  it("the allow-list the page names admits the Site's components", async () => {
    await sh(blockWith("kubefn-site-images"));
    expect(await walk.machinaImage()).toBe("ghcr.io/unbounded-cloud/machina:latest");
  });

  it("npm start, as the ServiceAccount, says who it reconciles as and listens", async () => {
    const line = fencedBlocks(walk.text, "sh")
      .flatMap((b) => b.split("\n"))
      .find((l) => l.includes("npm start"));
    expect(line).toBe("KUBECONFIG=… KUBEFN_AUDIT_TOKEN=… npm start");
    const command = line!
      .replace("KUBECONFIG=…", "KUBECONFIG=kubefn.kubeconfig")
      .replace("KUBEFN_AUDIT_TOKEN=…", `KUBEFN_AUDIT_TOKEN=${auditToken}`);
    host = spawn("bash", ["-c", command], {
      cwd: work.path,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...walk.env(),
        KUBEFN_PORT: String(hostPort),
        KUBEFN_LOG_FORMAT: "json",
        PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
      },
    });
    const append = (c: string) => {
      hostLog = (hostLog + c).slice(-200_000);
    };
    host.stdout?.setEncoding("utf8").on("data", append);
    host.stderr?.setEncoding("utf8").on("data", append);
    await eventually(
      "the host listening",
      async () => {
        if (host?.exitCode !== null) throw new Error(`npm start exited (${host?.exitCode}):\n${hostLog}`);
        return hostLog.includes('"msg":"listening"') ? true : undefined;
      },
      120_000,
    );
    expect(hostLog).toContain("system:serviceaccount:kubefn-system:kubefn");
    expect(hostLog).not.toContain("this identity is not in SELF_USERNAMES");
  }, 150_000);

  it("the examples' Proxy, SubPool and Site become Ready", async () => {
    await walk.applyExamples(target, forwardProxy);
    // The audit webhook batches for up to 30 s, as documented: a minute and a half is enough.
    await eventually(
      "Proxy, SubPool and Site Ready",
      async () => {
        const got = await walk.examplesReady();
        return got.every((s) => s === "True") ? got : undefined;
      },
      150_000,
    );
    expect(forwardProxy.requests.length).toBeGreaterThan(0);
    // Reconciled by that host, as the ServiceAccount (nothing else runs against this cluster).
    expect(hostLog).toMatch(/"msg":"pass".*"key":"proxy\/default\/local"/);
    expect(hostLog).toMatch(/"msg":"pass".*"key":"subpool\/\/demo-pool"/);
    expect(hostLog).toMatch(/"msg":"pass".*"key":"site\/\/lab"/);
  }, 180_000);

  it("deleting them runs their finalizers to the end", async () => {
    await sh(
      "kubectl delete -f examples/site.yaml -f examples/subpool-internal.yaml -f proxy.yaml --wait=true --timeout=150s",
    );
    expect(await kubectl("get", "proxies,subpools,sites", "-A", "-o", "name")).toBe("");
  }, 180_000);
});
