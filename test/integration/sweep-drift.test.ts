/**
 * Drift found by lists, against the real control plane, with every cluster event lost: nothing
 * posts to an intake here, so the only messages are the sweep's and the passes' own follow-ups.
 * kubefn runs as the least-privileged ServiceAccount (its RBAC must allow every list the sweep
 * makes), through a counting transport that sees every request on the wire.
 *
 * - steady state: a few sweeps over 5 converged SubPools and then over 20 send no message and make
 *   the same number of requests (lists per kind and page, not per object);
 * - drift the old per-object passes caught is caught by the next sweep, named by its reason, and
 *   converges: a Site's object deleted or edited by hand, a foreign Namespace that goes away, a
 *   Pod instance deleted, a cloud-init Secret rotated;
 * - what a SubPool derives inside its Namespace is not listed (kubefn holds no right on those kinds
 *   cluster-wide): with its event lost, an owned object deleted or edited by hand waits for the
 *   pool's safety-net pass, which repairs it.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  asServiceAccount,
  installCrdsAndRbac,
  optInNamespace,
  serviceAccountToken,
} from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyController } from "../../shared/controllers/proxy/controller.ts";
import { createKubernetesProvider } from "../../shared/controllers/proxy/providers/index.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { defaultSiteRegistry } from "../../shared/controllers/site/components/index.ts";
import { siteController } from "../../shared/controllers/site/controller.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { subPoolController } from "../../shared/controllers/subpool/controller.ts";
import {
  type CountingTransport,
  countingTransport,
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  type RecordedCall,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import {
  type Context,
  createRegistry,
  type PassMessage,
  type Registry,
  runPass,
  runSweep,
  type SweepSummary,
} from "../../shared/runtime/index.ts";
import { removeNamespaces } from "../support/namespaces.ts";

const suffix = Math.random().toString(36).slice(2, 6);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let admin: Kube;
let wire: CountingTransport;
let ctx: Context;
let registry: Registry;
let subPoolOnly: Registry;
const errors: string[] = [];
/** Follow-ups the passes sent (delivered by `drain`); the sweep's messages go to `swept`. */
let followUps: { message: PassMessage; at: number }[] = [];
let swept: PassMessage[] = [];
let collecting: "sweep" | "pass" = "sweep";
const proxyNs = `drift-${suffix}`;
/** A tenant namespace that has not opted in to kubefn (no RoleBinding of kubefn-tenant). */
const closedNs = `closed-${suffix}`;
const pools: string[] = [];
const sites: string[] = [];

function spec(): Record<string, unknown> {
  return {
    exposure: { mode: "Internal" },
    storage: { size: "1Gi" },
    cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "100m", memory: "64Mi" } } },
    cpaManager: {
      image: "ghcr.io/subrelay/cpa-manager:1.4.0",
      resources: { requests: { cpu: "100m", memory: "64Mi" } },
    },
  };
}

async function createPool(name: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.create(subPoolResource, {
        apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
        kind: "SubPool",
        metadata: { name },
        spec: spec(),
      });
      pools.push(name);
      return;
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
}

/** This file's objects: other test files share the cluster, and their objects are theirs. */
const ours = (m: PassMessage) => m.request.name.includes(suffix) || m.request.namespace === proxyNs;

/** One sweep as the platform runs it: drift due (resync 60, period 60), no tasks. */
async function sweep(): Promise<{ messages: PassMessage[]; summary: SweepSummary }> {
  swept = [];
  collecting = "sweep";
  const summary = await runSweep(ctx, registry, [], { shardSize: 100, attachListed: true });
  collecting = "pass";
  return { messages: swept, summary };
}

/** Runs `messages` and every follow-up they cause (delays capped at 1 s), as a queue would. */
async function drain(messages: PassMessage[]): Promise<void> {
  for (const m of messages.filter(ours)) await runPass(ctx, registry, m);
  for (let rounds = 0; followUps.length > 0 && rounds < 200; rounds++) {
    const next = followUps.shift()!;
    const wait = next.at - Date.now();
    if (wait > 0) await sleep(Math.min(wait, 1000));
    await runPass(ctx, registry, next.message);
  }
}

/** Sweeps and drains until a sweep sends nothing (the watch cache may trail a write briefly). */
async function converge(what: string, timeoutMs = 90_000): Promise<string[]> {
  const reasons: string[] = [];
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  while (quiet < 2) {
    if (Date.now() > deadline) throw new Error(`${what}: still drifting: ${reasons.slice(-10).join(", ")}`);
    const messages = (await sweep()).messages.filter(ours);
    reasons.push(...messages.map((m) => `${m.request.name}:${m.trigger?.reason ?? m.trigger?.kind}`));
    if (messages.length === 0) quiet++;
    else quiet = 0;
    await drain(messages);
    await sleep(300);
  }
  return reasons;
}

/**
 * Converges with every pool's StatefulSet ready: the StatefulSet controller and the node make a
 * pool's Pod ready on their own time (seconds on a loaded machine), and that change is drift a
 * pass must write; a steady window measured before it would count it. The readiness is read
 * before the convergence, so the passes it needs ran after it.
 */
async function settled(what: string, names: string[], timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const notReady: string[] = [];
    for (const name of names) {
      const sts = await admin
        .get<KubeObject>(Resources.StatefulSet, {
          namespace: subPoolNamespaceName(name),
          name: `${name}-cpa-manager`,
        })
        .catch(() => undefined);
      if (((sts?.status ?? {}) as { readyReplicas?: number }).readyReplicas !== 1) notReady.push(name);
    }
    await converge(what, Math.max(deadline - Date.now(), 1_000));
    if (notReady.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${what}: StatefulSet not ready: ${notReady.join(", ")}`);
    await sleep(500);
  }
}

/** Sweeps until one names `name` (within a few seconds: the watch cache trails by milliseconds). */
async function driftFor(name: string): Promise<PassMessage> {
  for (let i = 0; i < 30; i++) {
    const { messages } = await sweep();
    const hit = messages.find((m) => m.request.name === name);
    if (hit) {
      await drain(messages);
      return hit;
    }
    await sleep(200);
  }
  throw new Error(`no drift message for ${name}`);
}

/**
 * The same sweep as before drift was found by lists (the controllers without their drift
 * declarations: every object a pass each resync), for the side-by-side figure: requests of one
 * sweep and of the passes it sends, and the messages.
 */
async function legacyWindow(): Promise<{ requests: number; messages: number }> {
  const legacy = createRegistry([subPoolOnly.controllers[0]!].map(({ drift: _, ...def }) => def));
  const before = wire.calls().length;
  swept = [];
  collecting = "sweep";
  await runSweep(ctx, legacy, [], { shardSize: 100, attachListed: true, safetyNetSeconds: 7 * 86_400 });
  collecting = "pass";
  const mine = swept.filter((m) => m.request.name.includes(suffix));
  const messages = mine.length;
  for (const m of mine) await runPass(ctx, legacy, m);
  followUps = [];
  return { requests: wire.calls().length - before, messages };
}

/**
 * Requests of `n` steady sweeps of the SubPool controller alone, and the messages they sent for
 * this file's pools (other test files share the cluster and create objects of their own).
 */
async function steadyWindow(n: number): Promise<{
  requests: number;
  messages: number;
  reasons: string[];
  perSweep: number[];
  last: RecordedCall[];
}> {
  const perSweep: number[] = [];
  let last: RecordedCall[] = [];
  let messages = 0;
  const reasons: string[] = [];
  for (let i = 0; i < n; i++) {
    const before = wire.calls().length;
    swept = [];
    collecting = "sweep";
    await runSweep(ctx, subPoolOnly, [], {
      shardSize: 100,
      attachListed: true,
      safetyNetSeconds: 7 * 86_400,
    });
    collecting = "pass";
    perSweep.push(wire.calls().length - before);
    last = wire.calls().slice(before);
    const mine = swept.filter((m) => m.request.name.includes(suffix));
    messages += mine.length;
    reasons.push(...mine.map((m) => `${m.request.name}:${m.trigger?.reason ?? m.trigger?.kind}`));
  }
  return { requests: perSweep.reduce((a, b) => a + b, 0), messages, reasons, perSweep, last };
}

beforeAll(async () => {
  const adminKc = loadKubeConfig({ file: inject("kubeconfig") });
  admin = createKube(createNodeTransport(adminKc));
  await installCrdsAndRbac(admin);
  const token = await serviceAccountToken(createNodeTransport(adminKc), "kubefn-system", "kubefn");
  wire = countingTransport(createNodeTransport(asServiceAccount(adminKc, token)));
  const kube = createKube(wire, { fieldManager: "kubefn" });
  // What the sweep finds is measured here: a waiting pool's own follow-ups (subpool.test.ts has
  // them) are off, so that pools waiting on the proxy gateway this cluster does not run keep no
  // chain of follow-ups going through `drain`.
  const sweepOnly = { timings: { waitingFirst: undefined } };
  subPoolOnly = createRegistry([subPoolController(sweepOnly)]);
  registry = createRegistry([
    subPoolController(sweepOnly),
    proxyController({
      providers: (pass) => ({ kubernetes: createKubernetesProvider({ kube: pass.kube }) }),
      timings: { driftPoll: 60 },
    }),
    siteController({
      registry: defaultSiteRegistry(),
      env: {
        config: {
          imageRegistry: "ghcr.io/unbounded",
          imageTag: "v1",
          apiServerEndpoint: "https://10.0.0.1:6443",
        },
      },
      resyncSeconds: 60,
    }),
  ]);
  ctx = {
    kube,
    queue: {
      send: async (messages, delaySeconds) => {
        if (collecting === "sweep") swept.push(...(messages as PassMessage[]));
        else
          for (const message of messages as PassMessage[])
            followUps.push({ message, at: Date.now() + (delaySeconds ?? 0) * 1000 });
      },
    },
    clock: { now: () => new Date() },
    // Errors are kept: a drift list the ServiceAccount may not make must fail the test, not
    // quietly leave the decisions without it.
    log: {
      info: () => {},
      warn: () => {},
      error: (msg, fields) => errors.push(`${msg} ${JSON.stringify(fields)}`),
    },
    metrics: { count: () => {}, observe: () => {}, gauge: () => {} },
    random: Math.random,
  };
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: proxyNs },
  });
  await optInNamespace(admin, proxyNs);
}, 120_000);

afterAll(async () => {
  followUps = [];
  for (const name of pools) await admin.delete(subPoolResource, { name }).catch(() => undefined);
  for (const name of sites) await admin.delete(siteResource, { name }).catch(() => undefined);
  // Drive the finalizers so the pools and their Namespaces go.
  await converge("cleanup", 120_000).catch(() => undefined);
  // No pass runs for the Proxies now: their finalizers are taken off directly (Pods go with proxyNs).
  await removeNamespaces(admin, [proxyNs, closedNs], { dropFinalizers: true });
}, 300_000);

describe("sweep by lists", () => {
  it("steady state: no drift messages, and the same requests per sweep for 5 and for 20 SubPools", async () => {
    for (let i = 0; i < 5; i++) await createPool(`st${suffix}-${i}`);
    await settled("5 pools", [...pools]);
    const five = await steadyWindow(3);
    const legacyFive = await legacyWindow();
    for (let i = 5; i < 20; i++) await createPool(`st${suffix}-${i}`);
    await settled("20 pools", [...pools], 240_000);
    const twenty = await steadyWindow(3);
    const legacyTwenty = await legacyWindow();
    console.log(
      `sweep-drift steady: 5 SubPools → ${five.requests} requests in 3 sweeps (${five.perSweep.join("/")}), ${five.messages} messages; ` +
        `20 SubPools → ${twenty.requests} requests (${twenty.perSweep.join("/")}), ${twenty.messages} messages; ` +
        `paths ${JSON.stringify(countPaths(twenty.last))}`,
    );
    console.log(
      `sweep-drift side by side, one sweep with its passes at steady state: ` +
        `5 SubPools: by lists ${five.perSweep.at(-1)} requests / 0 messages, by passes ${legacyFive.requests} requests / ${legacyFive.messages} messages; ` +
        `20 SubPools: by lists ${twenty.perSweep.at(-1)} requests / 0 messages, by passes ${legacyTwenty.requests} requests / ${legacyTwenty.messages} messages`,
    );
    expect(legacyTwenty.messages).toBe(20);
    expect(legacyTwenty.requests).toBeGreaterThan(legacyFive.requests);
    expect(errors.filter((e) => e.startsWith("sweep"))).toEqual([]);
    expect(five.reasons).toEqual([]);
    expect(twenty.reasons).toEqual([]);
    expect(five.messages).toBe(0);
    expect(twenty.messages).toBe(0);
    expect(twenty.requests).toBe(five.requests);
    // Reads only, and no read of any one SubPool's objects: every request is a list or a shared read.
    const last = twenty.last;
    expect(last.every((c) => c.method === "GET")).toBe(true);
    expect(last.filter((c) => c.path.includes(`/namespaces/subpool-`))).toEqual([]);
  }, 420_000);

  it("a SubPool's object deleted or edited by hand, its event lost, is not the sweep's to find: the pool's safety-net pass repairs it", async () => {
    const name = `dr${suffix}`;
    await createPool(name);
    await converge(name);
    const ns = subPoolNamespaceName(name);
    /** A sweep's drift messages for this pool: none, nothing inside its Namespace being listed. */
    const driftOf = async () =>
      (await sweep()).messages.filter((m) => m.request.name === name && m.trigger?.kind === "drift");
    /** A sweep in which every object's safety-net pass is due, its pass for this pool run. */
    const safetyNet = async () => {
      swept = [];
      collecting = "sweep";
      await runSweep(ctx, registry, [], { shardSize: 100, attachListed: true, safetyNetSeconds: 60 });
      collecting = "pass";
      const mine = swept.filter((m) => m.request.name === name);
      expect(mine.map((m) => m.trigger?.kind)).toEqual(["safety-net"]);
      await drain(mine);
    };

    await admin.delete(Resources.ConfigMap, { namespace: ns, name: `${name}-config` });
    expect(await driftOf()).toEqual([]);
    await safetyNet();
    expect(await admin.get(Resources.ConfigMap, { namespace: ns, name: `${name}-config` })).toBeDefined();

    const sts = await admin.get<
      KubeObject & { spec: { template: { spec: { containers: { image: string }[] } } } }
    >(Resources.StatefulSet, { namespace: ns, name: `${name}-cpa-manager` });
    sts.spec.template.spec.containers[0]!.image = "example.com/hand-edited:1";
    await admin.update(Resources.StatefulSet, sts);
    expect(await driftOf()).toEqual([]);
    await safetyNet();
    const fixed = await admin.get<typeof sts>(Resources.StatefulSet, {
      namespace: ns,
      name: `${name}-cpa-manager`,
    });
    expect(fixed.spec.template.spec.containers[0]!.image).not.toBe("example.com/hand-edited:1");
  }, 240_000);

  it("a Site's per-Site objects deleted or edited by hand are found by the next sweep and converge", async () => {
    const name = `st${suffix}`;
    const siteNs = "kubefn-system";
    await admin.create(siteResource, {
      apiVersion: `${siteResource.group}/${siteResource.version}`,
      kind: "Site",
      metadata: { name },
      spec: {},
    });
    sites.push(name);
    await converge(name);

    await admin.delete(Resources.ConfigMap, { namespace: siteNs, name: `storage-${name}` });
    expect((await driftFor(name)).trigger).toEqual({ kind: "drift", reason: "missing:ConfigMap" });
    await converge(`${name} ConfigMap`);
    expect(
      await admin.get(Resources.ConfigMap, { namespace: siteNs, name: `storage-${name}` }),
    ).toBeDefined();

    const deployment = await admin.get<
      KubeObject & { spec: { template: { spec: { containers: { image: string }[] } } } }
    >(Resources.Deployment, { namespace: siteNs, name: `metalman-${name}` });
    deployment.spec.template.spec.containers[0]!.image = "example.com/hand-edited:1";
    await admin.update(Resources.Deployment, deployment);
    expect((await driftFor(name)).trigger).toEqual({ kind: "drift", reason: "changed:Deployment" });
    await converge(`${name} Deployment`);
    const fixed = await admin.get<typeof deployment>(Resources.Deployment, {
      namespace: siteNs,
      name: `metalman-${name}`,
    });
    expect(fixed.spec.template.spec.containers[0]!.image).not.toBe("example.com/hand-edited:1");
    // The Site drift lists are granted to kubefn's ServiceAccount (a refused list logs an error).
    expect(errors.filter((e) => e.startsWith("sweep"))).toEqual([]);
  }, 240_000);

  it("a Namespace conflict is reported once, then converges by lists when the foreign Namespace goes", async () => {
    const name = `nc${suffix}`;
    const ns = subPoolNamespaceName(name);
    await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    await createPool(name);
    await converge(name);
    const blocked = await admin.get<
      KubeObject & { status?: { conditions?: { type: string; reason: string }[] } }
    >(subPoolResource, { name });
    expect(blocked.status?.conditions?.find((c) => c.type === "Ready")?.reason).toBe("NamespaceConflict");

    await admin.delete(Resources.Namespace, { name: ns });
    // The namespace controller finalizes it; the sweep notices when it is gone.
    for (let i = 0; i < 200; i++) {
      try {
        const current = await admin.get(Resources.Namespace, { name: ns });
        if (current.metadata.ownerReferences?.length) break;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      await drain((await sweep()).messages);
      await sleep(250);
    }
    await converge(`${name} after the conflict`);
    const after = await admin.get<typeof blocked>(subPoolResource, { name });
    expect(after.status?.conditions?.find((c) => c.type === "Ready")?.reason).not.toBe("NamespaceConflict");
    const owned = await admin.get(Resources.Namespace, { name: ns });
    expect(owned.metadata.ownerReferences?.[0]?.uid).toBe(after.metadata.uid);
  }, 240_000);

  it("a Managed Proxy's Pod deleted by hand, and its cloud-init Secret rotated, are found by lists", async () => {
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: proxyNs, name: "init" },
      stringData: { "user-data": "#cloud-config\n# v1\n" },
    });
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: proxyNs, name: "managed" },
      spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "init" } } },
    });
    type ProxyObject = KubeObject & { status?: { providerID?: string; ip?: string } };
    const get = () => admin.get<ProxyObject>(proxyResource, { namespace: proxyNs, name: "managed" });
    await converge("proxy", 120_000);
    const first = (await get()).status?.providerID;
    expect(first).toMatch(/^kubernetes:\/\//);

    const [podNs, podName] = first!.slice("kubernetes://".length).split("/") as [string, string];
    await admin.delete(Resources.Pod, { namespace: podNs, name: podName }, { gracePeriodSeconds: 0 });
    for (let i = 0; i < 100; i++) {
      try {
        await admin.get(Resources.Pod, { namespace: podNs, name: podName });
        await sleep(200);
      } catch (err) {
        if (isNotFound(err)) break;
        throw err;
      }
    }
    expect((await driftFor("managed")).trigger?.reason).toBe("instance-gone");
    await converge("proxy after its Pod was deleted", 120_000);
    expect((await get()).status?.ip).toBeTruthy();

    const secret = await admin.get(Resources.Secret, { namespace: proxyNs, name: "init" });
    await admin.update(Resources.Secret, { ...secret, data: { "user-data": btoa("#cloud-config\n# v2\n") } });
    expect((await driftFor("managed")).trigger?.reason).toBe("spec-hash");
    await converge("proxy after its Secret rotated", 120_000);
    const rotated = await get();
    expect(rotated.status?.ip).toBeTruthy();
    expect(rotated.status?.providerID).toBeDefined();
  }, 300_000);

  it("a cloud-init retry is left to its own backoff while the Secret is missing, and sent once it appears", async () => {
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: proxyNs, name: "waiting" },
      spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "later" } } },
    });
    type ProxyObject = KubeObject & { status?: { conditions?: Array<{ type: string; reason: string }> } };
    const reasonOf = async () =>
      (
        await admin.get<ProxyObject>(proxyResource, { namespace: proxyNs, name: "waiting" })
      ).status?.conditions?.find((c) => c.type === "Provisioned")?.reason;
    // Its first pass (sent by the sweep, since no event is relayed here), without its follow-ups:
    // they retry with backoff, which a sweep that sends a pass every time would restart at 1 s.
    for (let i = 0; i < 30 && (await reasonOf()) !== "CloudInitError"; i++) {
      const mine = (await sweep()).messages.filter((m) => m.request.name === "waiting");
      for (const m of mine) await runPass(ctx, registry, m);
      followUps = [];
      await sleep(200);
    }
    expect(await reasonOf()).toBe("CloudInitError");
    for (let i = 0; i < 3; i++) {
      const mine = (await sweep()).messages.filter((m) => m.request.name === "waiting");
      expect(mine.map((m) => m.trigger?.reason)).toEqual([]);
    }
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: proxyNs, name: "later" },
      stringData: { "user-data": "#cloud-config\n" },
    });
    expect((await driftFor("waiting")).trigger?.reason).toBe("cloud-init-retry");
    await converge("proxy once its Secret appeared", 120_000);
    expect(await reasonOf()).not.toBe("CloudInitError");
  }, 300_000);

  it("a Proxy in a namespace that never opted in says so (Ready, a Warning Event), waits quietly, and converges once it does", async () => {
    const name = `closed-${suffix}`;
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: closedNs },
    });
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: closedNs, name: "init" },
      stringData: { "user-data": "#cloud-config\n" },
    });
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: closedNs, name },
      spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "init" } } },
    });
    type Condition = { type: string; status: string; reason: string; message: string };
    type ProxyObject = KubeObject & { status?: { ip?: string; conditions?: Condition[] } };
    const conditionOf = async (type: string) =>
      (await admin.get<ProxyObject>(proxyResource, { namespace: closedNs, name })).status?.conditions?.find(
        (c) => c.type === type,
      );
    for (let i = 0; i < 30 && (await conditionOf("Ready"))?.reason !== "NamespaceNotOptedIn"; i++) {
      const mine = (await sweep()).messages.filter((m) => m.request.name === name);
      for (const m of mine) await runPass(ctx, registry, m);
      followUps = [];
      await sleep(200);
    }
    const ready = await conditionOf("Ready");
    expect(ready).toMatchObject({ status: "False", reason: "NamespaceNotOptedIn" });
    expect(ready?.message).toContain(
      `kubectl create rolebinding kubefn-tenant -n ${closedNs} --clusterrole=kubefn-tenant --serviceaccount=kubefn-system:kubefn`,
    );
    const events = await admin.list<KubeObject & { type?: string; reason?: string; note?: string }>(
      Resources.Event,
      { namespace: closedNs },
    );
    const warnings = events.items.filter((e) => e.reason === "NamespaceNotOptedIn");
    expect(warnings.length).toBeGreaterThan(0);
    expect(new Set(warnings.map((e) => e.type))).toEqual(new Set(["Warning"]));
    // No hot retry: while the namespace stays closed, the sweep sends it nothing.
    for (let i = 0; i < 3; i++) {
      const mine = (await sweep()).messages.filter((m) => m.request.name === name);
      expect(mine.map((m) => m.trigger?.reason)).toEqual([]);
    }
    await optInNamespace(admin, closedNs);
    let reason: string | undefined;
    for (let i = 0; i < 50 && reason !== "namespace-opted-in"; i++) {
      reason = (await driftFor(name)).trigger?.reason;
      if (reason !== "namespace-opted-in") await sleep(200);
    }
    expect(reason).toBe("namespace-opted-in");
    await converge("proxy once its namespace opted in", 120_000);
    expect(await conditionOf("Provisioned")).toMatchObject({ status: "True" });
    expect(await conditionOf("Ready")).toMatchObject({ status: "True" });
  }, 300_000);
});

function countPaths(calls: readonly { method: string; path: string }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of calls) {
    const key = `${c.method} ${c.path.split("?")[0]}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}
