/**
 * kubefn's Worker (wrangler.toml, in workerd through wrangler's test harness) against a private
 * API server: a devcluster of the production profile, TLS with a private CA and nothing in front
 * of it. The Worker is given the API server's own URL (`KUBE_SERVER`), which workerd cannot trust,
 * and no pass-through exists: the only way in is the relay's tunnel (`KUBE_VIA = "relay"`), which
 * the relay (infra/relay/main.ts, a process, `KUBEFN_TUNNEL_URL`) opens from the cluster's side to
 * the Worker's `/v1/tunnel`, carrying each API request, signed, to the API server over the
 * cluster's TLS. The same relay's watch is the Worker's intake: no event comes from the test.
 *
 * - direct, the Worker cannot reach the API server (TLS to a private CA);
 * - through the relay's tunnel, a created Proxy's pass writes its status as the ServiceAccount,
 *   and the cron sweep and the probes make it Ready, and the one whose pass failed before;
 * - the tunnel's opening must be signed with RELAY_SECRET, and a captured opening is refused;
 * - the relay adds no credential: a request without the Worker's bearer is anonymous there.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { installCrdsAndRbac, optInNamespace, serviceAccountToken } from "../../functions/node/install.ts";
import { apiForward, apiServerOf } from "../../infra/relay/tunnel.ts";
import { signBatch } from "../../shared/auth/index.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { signTunnelOpening, TUNNEL_PATH } from "../../shared/tunnel/index.ts";
import { eventually } from "../setup/cluster.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { freePort } from "../support/oidc-issuer.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = "tunnel-e2e";
const relaySecret = crypto.randomUUID();
const auditToken = crypto.randomUUID();

type Proxy = ProxyObject & KubeObject;

let cluster: OwnDevcluster;
let kube: Kube;
let harness: TestHarness;
let workerUrl: URL;
let relay: ChildProcess | undefined;
let relayLog = "";
let forwardProxy: ForwardProxy;
let target: Target;
let workerToken: string;

function workerLogs(): Array<Record<string, unknown>> {
  return harness.getLogs().flatMap((l) => {
    try {
      return [JSON.parse(l.message) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

function workerOptions(kubeVia: "direct" | "relay") {
  return {
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        vars: {
          KUBE_SERVER: cluster.server,
          KUBE_VIA: kubeVia,
          PROXY_RESYNC_SECONDS: "60",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
        },
        secrets: { KUBE_TOKEN: workerToken, RELAY_SECRET: relaySecret, AUDIT_TOKEN: auditToken },
      },
    ],
  };
}

/** A signed relay batch announcing `object`, posted to the Worker's intake. */
async function announce(object: KubeObject): Promise<{ status: number }> {
  const body = JSON.stringify({
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: [
      {
        type: "ADDED",
        resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" },
        object,
      },
    ],
  });
  return harness.fetch("/v1/events", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(await signBatch(relaySecret, body, Date.now() / 1000)),
    },
    body,
  });
}

/** The status of a raw WebSocket opening of the tunnel with `query` (101 when it was accepted). */
function openingStatus(query: URLSearchParams | string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(`${TUNNEL_PATH}?${query}`, workerUrl), {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-key": Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64"),
        "sec-websocket-version": "13",
      },
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

function externalProxy(name: string): Proxy {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${target.port}/`, intervalSeconds: 10 },
    },
  } as unknown as Proxy;
}

const provisionedByWorker = (name: string) =>
  eventually(
    async () => {
      const p = await kube.get<Proxy>(proxyResource, { namespace, name });
      const provisioned = p.status?.conditions?.find((c) => c.type === "Provisioned");
      const fields = (p.metadata.managedFields ?? []) as Array<{ manager?: string; subresource?: string }>;
      const byWorker = fields.some((f) => f.manager === "kubefn" && f.subresource === "status");
      return provisioned?.status === "True" && byWorker ? p : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: `${name} Provisioned=True, written by the Worker` },
  );

/**
 * The relay as its image runs it (infra/relay/main.ts), watching with the admin's kubeconfig (its
 * own identity only lists and watches; the tunnel forwards the Worker's bearer, not it), sending
 * batches to the Worker's intake and opening the tunnel to it. Resolves once the tunnel is open.
 */
async function startRelay(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "infra/relay/main.ts"], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      KUBECONFIG: cluster.kubeconfig,
      KUBEFN_INTAKE_URL: new URL("/v1/events", workerUrl).href,
      KUBEFN_TUNNEL_URL: `ws://${workerUrl.host}${TUNNEL_PATH}`,
      KUBEFN_RELAY_SECRET: relaySecret,
      KUBEFN_RELAY_PORT: String(await freePort()),
      KUBEFN_RELAY_BATCH_INTERVAL_MS: "200",
      KUBEFN_LOG_FORMAT: "json",
    },
  });
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    relayLog = (relayLog + c).slice(-20_000);
  });
  child.stdout?.setEncoding("utf8").on("data", (c: string) => {
    relayLog = (relayLog + c).slice(-20_000);
  });
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the relay exited (${child.exitCode}):\n${relayLog}`);
      return relayLog.includes('"msg":"tunnel open"') ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: "the relay's tunnel open" },
  );
  return child;
}

beforeAll(async () => {
  cluster = await startOwnDevcluster([], { profile: "production" });
  const admin = createNodeTransport(loadKubeConfig({ file: cluster.kubeconfig }));
  kube = createKube(admin, { fieldManager: "kubefn-e2e" });
  await installCrdsAndRbac(kube);
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(kube, namespace);
  workerToken = await serviceAccountToken(admin, "kubefn-system", "kubefn");
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  harness = createTestHarness(workerOptions("direct"));
  workerUrl = (await harness.listen()).url;
}, 180_000);

afterAll(async () => {
  if (relay && relay.exitCode === null && relay.signalCode === null) {
    const exited = new Promise((resolve) => relay?.once("exit", resolve));
    relay.kill("SIGTERM");
    const timer = setTimeout(() => relay?.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
  await harness?.close();
  await Promise.all([forwardProxy?.close(), target?.close()]);
  // The cluster is this file's own: stopping it removes every object in it.
  await cluster?.close();
}, 120_000);

describe("a Worker against a private API server", () => {
  it("cannot reach it directly: workerd does not trust the cluster's private CA, and nothing else is in front", async () => {
    expect(cluster.profile).toBe("production");
    expect(cluster.httpProxy).toBe("");
    await kube.create(proxyResource, externalProxy("direct"));
    const from = workerLogs().length;
    expect((await announce(externalProxy("direct"))).status).toBe(202);
    // Every API request fails at TLS: kubefn holds back, reconciling nothing.
    const refused = await eventually(
      async () =>
        workerLogs()
          .slice(from)
          .find(
            (l) => String(l.msg).startsWith("not reconciling") && String(l.error).includes("fetch failed"),
          ),
      { timeoutMs: 60_000, intervalMs: 250, what: "the Worker's API requests failing" },
    );
    expect(refused.level).toBe("warn");
    const p = await kube.get<Proxy>(proxyResource, { namespace, name: "direct" });
    expect(p.status).toBeUndefined();
  });

  it("reaches it through the relay's tunnel: the pass writes the Proxy's status as kubefn's ServiceAccount", async () => {
    await harness.update(workerOptions("relay"));
    workerUrl = (await harness.listen()).url;
    relay = await startRelay();
    // No event from the test: the relay's watch brings each Proxy to the intake, and the passes'
    // reads and writes go back through its tunnel.
    await kube.create(proxyResource, externalProxy("tunnelled"));
    const p = await provisionedByWorker("tunnelled");
    expect(p.status?.ip).toBe("127.0.0.1");
  });

  it("probes and sweeps through it too: the cron runs' lists and probes make both Proxies Ready", async () => {
    await eventually(
      async () => {
        const run = await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
        expect(run.outcome).toBe("ok");
        const p = await kube.get<Proxy>(proxyResource, { namespace, name: "tunnelled" });
        // The Proxy whose pass failed while the API server was out of reach: the sweep finds it.
        const missed = await kube.get<Proxy>(proxyResource, { namespace, name: "direct" });
        return p.status?.phase === "Ready" && missed.status?.phase === "Ready" ? p : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 3000, what: "tunnelled Ready" },
    );
    expect(target.hits).toBeGreaterThan(0);
  }, 120_000);

  it("opens only for RELAY_SECRET's signature, and each opening once", async () => {
    expect(await openingStatus("")).toBe(401);
    expect(
      await openingStatus(await signTunnelOpening("x".repeat(36), Date.now() / 1000, crypto.randomUUID())),
    ).toBe(401);
    const stale = await signTunnelOpening(relaySecret, Date.now() / 1000 - 3600, crypto.randomUUID());
    expect(await openingStatus(stale)).toBe(401);
    const captured = await signTunnelOpening(relaySecret, Date.now() / 1000, crypto.randomUUID());
    expect(await openingStatus(captured)).toBe(101);
    expect(await openingStatus(captured)).toBe(409);
  });

  it("the relay adds no credential: a request without the Worker's bearer is anonymous at the API server", async () => {
    const { server, ca } = apiServerOf(loadKubeConfig({ file: cluster.kubeconfig }));
    const forward = apiForward(server, ca);
    const base = {
      type: "request" as const,
      id: crypto.randomUUID(),
      time: Math.floor(Date.now() / 1000),
      method: "GET",
      path: `/apis/crawl.kubefn.dev/v1alpha1/namespaces/${namespace}/proxies`,
      signature: "",
    };
    const anonymous = await forward({ ...base, headers: { accept: "application/json" } });
    expect(anonymous.status).toBe(403);
    expect(anonymous.body).toContain("system:anonymous");
    const asKubefn = await forward({
      ...base,
      headers: { accept: "application/json", authorization: `Bearer ${workerToken}` },
    });
    expect(asKubefn.status).toBe(200);
  });
});
