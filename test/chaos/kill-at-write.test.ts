/**
 * Kill at every write: for each write a Managed Proxy's passes make (on the pod provider: the
 * Pod, then its cloud-init Secret), the Node host is killed
 * (SIGKILL) right after that write reached the API server — the fault proxy holds the answer,
 * kills the host, and drops the connection — then a new host starts, and the Proxy must converge
 * with nothing leaked or doubled (exactly one instance with the current cloud-init, no orphaned
 * Pod, no stuck finalizer).
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  proxyFinalizer,
  proxyResource,
  proxySpecHashAnnotation,
} from "../../shared/controllers/proxy/api.ts";
import {
  createFetchTransport,
  createKube,
  isNotFound,
  type Kube,
  Resources,
} from "../../shared/kube/index.ts";
import type { HostProcess } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, type SeenRequest, startFaultProxy } from "../support/fault-proxy.ts";
import { chaosHostEnv, serviceAccountKubeconfigVia, startChaosHost } from "./drivers.ts";
import { findProblems } from "./scenario.ts";

let admin: Kube;
let faults: FaultProxy;
let env: Record<string, string>;
let host: HostProcess | undefined;
const namespaces: string[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken, kubeconfig } = clusterInfo();
  admin = createKube(createFetchTransport({ server: httpProxy, token: adminToken }), {
    fieldManager: "chaos",
  });
  faults = await startFaultProxy(httpProxy);
  env = chaosHostEnv(await serviceAccountKubeconfigVia(kubeconfig, faults.url));
}, 180_000);

afterAll(async () => {
  faults?.onForwarded(undefined);
  host ??= (await startChaosHost(env)).host;
  for (const name of namespaces) await admin.delete(Resources.Namespace, { name }).catch(() => undefined);
  for (const name of namespaces) await gone(name);
  expect(await host.stop()).toBe(0);
  await faults?.close();
}, 120_000);

async function gone(name: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const err = await admin.get(Resources.Namespace, { name }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (isNotFound(err)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

function exited(h: HostProcess): Promise<void> {
  if (h.child.exitCode !== null || h.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => h.child.once("exit", () => resolve()));
}

async function ensureHost(): Promise<HostProcess> {
  if (!host || host.child.exitCode !== null || host.child.signalCode !== null)
    host = (await startChaosHost(env)).host;
  return host;
}

async function converged(
  namespace: string,
  expected: Map<string, string>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let quietSince: number | undefined;
  let problems: string[] = [];
  for (;;) {
    const r = await findProblems(admin, namespace, expected);
    problems = [...r.leaks, ...r.pending];
    if (problems.length === 0) {
      quietSince ??= Date.now();
      if (Date.now() - quietSince >= 3000) return;
    } else quietSince = undefined;
    if (Date.now() > deadline) throw new Error(`not converged: ${problems.join("; ")}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

const proxy = (namespace: string, cloudInit: string) => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { name: "victim", namespace },
  spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: cloudInit } },
});

type Stage = "create" | "update" | "delete";
const onProxy = (ns: string, r: SeenRequest) =>
  r.path.startsWith(`/apis/crawl.kubefn.dev/v1alpha1/namespaces/${ns}/proxies/victim?`);

/** Each write a pass can make, the stage that makes it, and how to recognise it on the wire. */
const writes: Array<{
  write: string;
  stage: Stage;
  is: (ns: string, r: SeenRequest, body: string) => boolean;
}> = [
  {
    write: "finalizer added",
    stage: "create",
    is: (ns, r, body) => r.method === "PATCH" && onProxy(ns, r) && body.includes(proxyFinalizer),
  },
  {
    write: "instance created",
    stage: "create",
    is: (ns, r) => r.method === "POST" && r.path.startsWith(`/api/v1/namespaces/${ns}/pods?`),
  },
  {
    write: "instance's cloud-init Secret created",
    stage: "create",
    is: (ns, r) => r.method === "POST" && r.path.startsWith(`/api/v1/namespaces/${ns}/secrets?`),
  },
  {
    write: "spec-hash annotation",
    stage: "create",
    is: (ns, r, body) => r.method === "PATCH" && onProxy(ns, r) && body.includes(proxySpecHashAnnotation),
  },
  {
    write: "status",
    stage: "create",
    is: (ns, r) =>
      r.method === "PATCH" &&
      r.path.startsWith(`/apis/crawl.kubefn.dev/v1alpha1/namespaces/${ns}/proxies/victim/status`),
  },
  {
    write: "instance deleted for a replacement",
    stage: "update",
    is: (ns, r) => r.method === "DELETE" && r.path.startsWith(`/api/v1/namespaces/${ns}/pods/`),
  },
  {
    write: "replacement instance created",
    stage: "update",
    is: (ns, r) => r.method === "POST" && r.path.startsWith(`/api/v1/namespaces/${ns}/pods?`),
  },
  {
    write: "instance deleted with its Proxy",
    stage: "delete",
    is: (ns, r) => r.method === "DELETE" && r.path.startsWith(`/api/v1/namespaces/${ns}/pods/`),
  },
  {
    write: "finalizer removed",
    stage: "delete",
    is: (ns, r, body) =>
      r.method === "PATCH" &&
      onProxy(ns, r) &&
      body.includes('"finalizers"') &&
      !body.includes(proxyFinalizer),
  },
];

describe("kill at every write", () => {
  it.each(writes)(
    "host killed right after: $write ($stage) → a new host converges, nothing leaked or doubled",
    async ({ stage, is }) => {
      const ns = `kill-${randomBytes(3).toString("hex")}`;
      namespaces.push(ns);
      await admin.create(Resources.Namespace, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns },
      });
      const running = await ensureHost();
      const expected = new Map([["victim", "#cloud-config v1"]]);

      let killed = false;
      const arm = () =>
        faults.onForwarded((r, body) => {
          if (killed || !is(ns, r, body) || (r.upstreamStatus ?? 500) >= 300) return "answer";
          killed = true;
          running.child.kill("SIGKILL");
          return "reset";
        });
      if (stage === "create") arm();
      await admin.create(proxyResource, proxy(ns, "#cloud-config v1"));
      if (stage !== "create") {
        await converged(ns, expected);
        arm();
        if (stage === "update") {
          await admin.patch(
            proxyResource,
            { namespace: ns, name: "victim" },
            {
              type: "merge",
              body: { spec: { cloudInit: { inline: "#cloud-config v2" } } },
            },
          );
          expected.set("victim", "#cloud-config v2");
        } else {
          await admin.delete(proxyResource, { namespace: ns, name: "victim" });
          expected.delete("victim");
        }
      }
      const deadline = Date.now() + 60_000;
      while (!killed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      faults.onForwarded(undefined);
      expect(killed).toBe(true);
      await exited(running);
      expect(running.child.signalCode).toBe("SIGKILL");

      await ensureHost();
      await converged(ns, expected);
    },
    150_000,
  );
});
