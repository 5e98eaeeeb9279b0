/**
 * vitest globalSetup of the "integration" project: starts infra/devcluster (a real
 * kube-apiserver + etcd + controllers + simulated node in one process) once per run, plus a small
 * audit-webhook collector the API server posts its audit EventLists to, and provides to tests:
 *
 * - `kubeconfig`      path of the admin kubeconfig (CA embedded, admin bearer token)
 * - `server`          https://127.0.0.1:N (the API server)
 * - `httpProxy`       http://127.0.0.1:M (plain-HTTP pass-through; adds no credentials)
 * - `version`         the server's gitVersion, e.g. v1.37.2
 * - `adminToken`      the admin bearer token (group system:masters)
 * - `dataDir`         the devcluster's data directory (its log is devcluster.log there)
 * - `devclusterBin`   path of the devcluster binary (`<bin> kubectl ...`)
 * - `auditCollector`  http://127.0.0.1:K — `GET /events?since=<seq>` returns the audit events
 *                     received so far as `{ events: AuditEvent[], next: number }`
 *
 * Tests should use the typed helpers in test/setup/cluster.ts rather than `inject` directly.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { parse as parseYaml } from "yaml";
import { allowForKubefn, trustAsKubefn } from "../../functions/node/install.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { waitForDefaultServiceAccount } from "../support/namespaces.ts";
import { tempRootEnv } from "../support/temp-dir.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** Path of the devcluster's admin kubeconfig. */
    kubeconfig: string;
    /** The API server URL, https://127.0.0.1:N. */
    server: string;
    /** Plain-HTTP loopback URL forwarding to the API server, Authorization passed through. */
    httpProxy: string;
    /** The server's version (gitVersion), e.g. "v1.37.2". */
    version: string;
    /** The admin bearer token (group system:masters). */
    adminToken: string;
    /** The devcluster's data directory. */
    dataDir: string;
    /** Path of the devcluster binary. */
    devclusterBin: string;
    /** URL of the audit collector: GET /events?since=<seq> → { events, next }. */
    auditCollector: string;
  }
}

export const devclusterBin = fileURLToPath(new URL("../../infra/devcluster/bin/devcluster", import.meta.url));
/**
 * This checkout's audit policy, named explicitly: the devcluster would otherwise take the one
 * beside its binary's real path (another checkout's, where the binary is shared by a symlink).
 */
const auditPolicy = fileURLToPath(new URL("../../infra/audit/policy.yaml", import.meta.url));
const READY_PREFIX = "devcluster ready ";
const READY_TIMEOUT_MS = 120_000;

interface ReadyInfo {
  kubeconfig: string;
  server: string;
  httpProxy: string;
  version: string;
  dataDir: string;
}

/** Receives audit EventList batches (bearer token checked) and serves them back to tests. */
function startAuditCollector(token: string): Promise<{ server: Server; url: string }> {
  const events: unknown[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://collector");
    if (req.method === "GET" && url.pathname === "/events") {
      const since = Number(url.searchParams.get("since") ?? "0") || 0;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ events: events.slice(since), next: events.length }));
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          kind?: string;
          items?: unknown[];
        };
        if (body.kind === "EventList" && Array.isArray(body.items)) events.push(...body.items);
        res.writeHead(200).end();
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({ server, url: `http://127.0.0.1:${port}` });
    });
  });
}

function waitForReady(child: ChildProcess, stderrTail: () => string): Promise<ReadyInfo> {
  return new Promise<ReadyInfo>((resolve, reject) => {
    let out = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      reject(new Error(`devcluster ${why}; stderr tail:\n${stderrTail()}`));
    };
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      fail(`not ready after ${READY_TIMEOUT_MS / 1000}s`);
    }, READY_TIMEOUT_MS);
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const line = out.split("\n").find((l) => l.startsWith(READY_PREFIX));
      if (!line || !out.includes("\n", out.indexOf(READY_PREFIX))) return;
      clearTimeout(timer);
      resolve(JSON.parse(line.slice(READY_PREFIX.length)) as ReadyInfo);
    });
    child.once("exit", (code, signal) => fail(`exited (${signal ?? code}) before it was ready`));
    child.once("error", (err) => fail(`failed to start: ${err.message}`));
  });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(devclusterBin)) {
    throw new Error(`${devclusterBin} is missing: run \`npm run build:devcluster\` first (needs Go ≥ 1.26)`);
  }
  // The run's temporary root: the workers (forked after this) make their temporary directories
  // in it (test/support/temp-dir.ts) and the teardown removes it, tokens and all.
  const tempRoot = mkdtempSync(join(tmpdir(), "kubefn-test-run-"));
  process.env[tempRootEnv] = tempRoot;
  const removeTempRoot = () => rmSync(tempRoot, { recursive: true, force: true });
  const auditToken = randomBytes(24).toString("hex");
  const collector = await startAuditCollector(auditToken);

  // The lanes' devclusters start at the same moment: one may lose a port it picked to the other
  // before binding it, and is started again (twice at most).
  let child: ChildProcess;
  let tail = "";
  let exited: Promise<void>;
  let info: ReadyInfo;
  for (let attempt = 1; ; attempt++) {
    child = spawn(
      devclusterBin,
      [
        "--exit-with-parent",
        "--audit-webhook-url",
        `${collector.url}/audit`,
        "--audit-webhook-token",
        auditToken,
        "--audit-policy",
        auditPolicy,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    tail = "";
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      tail = (tail + chunk).slice(-8000);
    });
    const started = child;
    exited = new Promise<void>((resolve) => started.once("exit", () => resolve()));
    try {
      info = await waitForReady(child, () => tail);
      break;
    } catch (err) {
      if (attempt < 3 && /bind: address already in use/.test(String(err))) continue;
      collector.server.close();
      removeTempRoot();
      throw err;
    }
  }
  const kc = parseYaml(readFileSync(info.kubeconfig, "utf8")) as {
    users: Array<{ user: { token: string } }>;
  };
  const adminToken = kc.users[0]?.user.token ?? "";
  // Many files run kubefn's passes as the admin (the security files as kubefn's ServiceAccount):
  // the admission policy kubefn-state-is-kubefns lets only listed identities write status.
  // The files that run kubefn as its ServiceAccount use test images, a test registry for Site
  // components and SubPool hostnames under pools.example.test: the installer's allow-lists say so
  // (admission-policy-shapes.yaml); the security files' attacks use names outside them.
  try {
    const admin = createKube(createNodeTransport(loadKubeConfig({ file: info.kubeconfig })));
    await trustAsKubefn(admin, "devcluster-admin", "admin");
    await allowForKubefn(admin, "kubefn-proxy-images", "devcluster-tests", "registry.example/*");
    await allowForKubefn(admin, "kubefn-site-images", "devcluster-tests", "ghcr.io/unbounded/*");
    await allowForKubefn(admin, "kubefn-subpool-hostnames", "devcluster-tests", "*.pools.example.test");
    // The API server refuses every Pod of a namespace without its ServiceAccount: wait until the
    // controller that makes them runs (slow right after start on a loaded machine).
    await waitForDefaultServiceAccount(admin, "default");
  } catch (err) {
    child.kill("SIGTERM");
    collector.server.close();
    removeTempRoot();
    throw err;
  }

  project.provide("kubeconfig", info.kubeconfig);
  project.provide("server", info.server);
  project.provide("httpProxy", info.httpProxy);
  project.provide("version", info.version);
  project.provide("adminToken", adminToken);
  project.provide("dataDir", info.dataDir);
  project.provide("devclusterBin", devclusterBin);
  project.provide("auditCollector", collector.url);

  return async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const killTimer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(killTimer);
    await new Promise<void>((resolve) => collector.server.close(() => resolve()));
    removeTempRoot();
  };
}
