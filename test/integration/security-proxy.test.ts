/**
 * Attacks on the proxy operator by tenants, on the devcluster, with the reconciler running as the
 * kubefn ServiceAccount (so RBAC and the admission policy apply to it too):
 *
 * - mallory has the built-in `edit` role in her namespace, plus write access to proxies/status
 *   (and subpools/status) granted by RBAC — the API server still refuses her status writes, as it
 *   refuses anyone's but kubefn's (the admission policy kubefn-state-is-kubefns);
 * - kubefn's own token, used outside kubefn (stolen), stands in for a status writer kubefn trusts:
 *   a forged providerID must still not act as a pointer;
 * - vic has only `view` there (get pods, not secrets);
 * - another namespace holds a victim Pod, and a Pod that looks like another Proxy's instance.
 *
 * Nothing tenant-written may act as a pointer, Secret bytes must not reach the Pod spec, and a
 * stale snapshot must never cause a provider side effect.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import {
  type Proxy as ProxyObject,
  proxyResource,
  proxySpecHashAnnotation,
} from "../../shared/controllers/proxy/api.ts";
import { proxyController } from "../../shared/controllers/proxy/controller.ts";
import { discoveryRoutes } from "../../shared/controllers/proxy/discovery/routes.ts";
import { createKubernetesProvider } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import {
  managedByTagKey,
  managedByTagValue,
  nameFromUID,
  ownerTagKey,
  ownerTags,
} from "../../shared/controllers/proxy/providers/provider.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { encodeHealthState, HEALTH_ANNOTATION } from "../../shared/health/stored-state.ts";
import {
  ForbiddenError,
  isNotFound,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import {
  type Context,
  createRegistry,
  type PassMessage,
  type Registry,
  runPass,
} from "../../shared/runtime/index.ts";
import { adminKube, kubefnKube, tenant } from "../security/tenants.ts";
import { eventually } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { passContext } from "../support/pass-context.ts";

const suffix = Date.now().toString(36);
const tenantNs = `tenant-${suffix}`;
const victimNs = `victim-${suffix}`;
const secretWord = `s3cret-${suffix}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A crawler for every namespace: an explicit choice (a JSON credential with namespaces "*"). */
const clusterWideCrawler = JSON.stringify([
  { name: "crawler", token: "crawler-token-0123456789", namespaces: "*" },
]);

let admin: Kube;
let kubefn: Kube;
let mallory: Kube;
let vic: Kube;
let eve: Kube;
let registry: Registry;
let ctx: Context;

type ProxyKube = ProxyObject & KubeObject;
const getProxy = (name: string) => admin.get<ProxyKube>(proxyResource, { namespace: tenantNs, name });
const podsOwnedBy = async (uid: string) =>
  (await admin.list(Resources.Pod, { labelSelector: `${ownerTagKey}=${uid}` })).items;
const message = (name: string, snapshot?: KubeObject): PassMessage => ({
  request: { controller: "proxy", namespace: tenantNs, name },
  attempt: 0,
  ...(snapshot ? { snapshot } : {}),
});

/** Runs passes as kubefn until `done` holds for the Proxy (undefined once it is gone). */
async function drive(name: string, done: (p: ProxyKube | undefined) => boolean | Promise<boolean>) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    await runPass(ctx, registry, message(name));
    const p = await getProxy(name).catch((err) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    if (await done(p)) return p;
    if (Date.now() > deadline) throw new Error(`${name} did not converge: ${JSON.stringify(p?.status)}`);
    await sleep(150);
  }
}

async function createProxy(as: Kube, name: string, spec: Record<string, unknown>): Promise<ProxyKube> {
  return eventually(
    async () => {
      try {
        return await as.create<ProxyKube>(proxyResource, {
          apiVersion: "crawl.kubefn.dev/v1alpha1",
          kind: "Proxy",
          metadata: { name, namespace: tenantNs },
          spec,
        });
      } catch (err) {
        // The aggregated `edit` rules and a fresh CRD's handler arrive a moment after install.
        if (isNotFound(err) || err instanceof ForbiddenError) return undefined;
        throw err;
      }
    },
    { timeoutMs: 30_000, intervalMs: 250, what: "mallory may create Proxies" },
  );
}

async function untouched(namespace: string, name: string, uid: string): Promise<void> {
  const pod = await admin.get(Resources.Pod, { namespace, name });
  expect(pod.metadata.uid).toBe(uid);
  expect(pod.metadata.deletionTimestamp).toBeUndefined();
}

/**
 * Tries `write` until the API server refuses it (a policy takes effect a moment after it is
 * created; an early success is undone and tried again), and returns the refusal; returns what
 * was written when the API server still took it after 15 s.
 */
async function refusedOrTaken<T>(
  write: () => Promise<T>,
  undo: () => Promise<void>,
): Promise<T | ForbiddenError> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      const taken = await write();
      if (Date.now() > deadline) return taken;
      await undo();
    } catch (err) {
      if (err instanceof ForbiddenError) return err;
      throw err;
    }
    await sleep(250);
  }
}

let victimPod: KubeObject;
let lookalikePod: KubeObject;

beforeAll(async () => {
  admin = adminKube();
  kubefn = await kubefnKube(admin);
  for (const name of [tenantNs, victimNs]) {
    await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await optInNamespace(admin, name);
  }
  mallory = await tenant(admin, {
    namespace: tenantNs,
    name: "mallory",
    clusterRole: "edit",
    rules: [
      { apiGroups: ["crawl.kubefn.dev"], resources: ["proxies/status"], verbs: ["get", "patch", "update"] },
    ],
  });
  vic = await tenant(admin, { namespace: tenantNs, name: "vic", clusterRole: "view" });
  eve = await tenant(admin, { namespace: tenantNs, name: "eve", clusterRole: "edit" });
  victimPod = await admin.create(Resources.Pod, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "database", namespace: victimNs },
    spec: { containers: [{ name: "db", image: "registry.example/db:1" }] },
  });
  // Looks like a kubefn instance of some other Proxy (its tags, its deterministic name).
  const otherUid = crypto.randomUUID();
  lookalikePod = await admin.create(Resources.Pod, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "px-lookalike", namespace: victimNs, labels: ownerTags(otherUid) },
    spec: { automountServiceAccountToken: false, containers: [{ name: "p", image: "registry.example/p:1" }] },
  });
  registry = createRegistry([
    proxyController({
      providers: { kubernetes: createKubernetesProvider({ kube: kubefn }) },
      // The operator allows its own registry's images; the replacement tests below use them.
      instanceAllowList: { images: ["registry.example/*"], machineTypes: [] },
    }),
  ]);
  ctx = passContext(kubefn);
}, 120_000);

afterAll(async () => {
  // The look-alike carries kubefn's tags: remove it at once, so no other file's orphan sweep meets it.
  await admin
    ?.delete(Resources.Pod, { namespace: victimNs, name: "px-lookalike" }, { gracePeriodSeconds: 0 })
    .catch(() => {});
  // No pass runs at the end: the Proxies' finalizers are taken off directly (their Pods go with them).
  if (admin) await removeNamespaces(admin, [tenantNs, victimNs], { dropFinalizers: true });
}, 180_000);

describe("cloud-init from a Secret", () => {
  it("a tenant with `view` (get pods) reads no Secret bytes through the instance Pod", async () => {
    await mallory.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "ci", namespace: tenantNs },
      stringData: { "user-data": `#cloud-config\npassword: ${secretWord}\n` },
    });
    const proxy = await createProxy(mallory, "with-secret", {
      mode: "Managed",
      provider: "kubernetes",
      cloudInit: { secretRef: { name: "ci" } },
    });
    await drive("with-secret", async () => (await podsOwnedBy(proxy.metadata.uid!)).length === 1);

    await expect(vic.get(Resources.Secret, { namespace: tenantNs, name: "ci" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    const seen = await vic.list(Resources.Pod, { namespace: tenantNs });
    expect(seen.items.length).toBeGreaterThan(0);
    expect(JSON.stringify(seen)).not.toContain(secretWord);
    // Nor through the annotations kubefn writes on the Proxy (an unsalted hash would let vic
    // confirm a guess offline).
    const annotations = JSON.stringify(
      (await vic.get(proxyResource, { namespace: tenantNs, name: "with-secret" })).metadata,
    );
    expect(annotations).not.toContain(secretWord);
    // The Secret the Pod mounts is labelled for the Proxy and controlled by the Pod.
    const [pod] = await podsOwnedBy(proxy.metadata.uid!);
    const mounted = await admin.get(Resources.Secret, {
      namespace: tenantNs,
      name: `${pod!.metadata.name}-cloud-init`,
    });
    expect(mounted.metadata.labels?.[ownerTagKey]).toBe(proxy.metadata.uid);
    expect(mounted.metadata.ownerReferences?.[0]).toMatchObject({
      kind: "Pod",
      uid: pod!.metadata.uid,
      controller: true,
    });
  });
});

describe("cloud-init from a Secret the tenant may not read (confused deputy)", () => {
  /**
   * Every Secret byte kubefn has written in the tenant's namespace (the instances' cloud-init
   * Secrets), decoded.
   */
  async function bytesKubefnWrote(): Promise<string> {
    const made = await admin.list(Resources.Secret, {
      namespace: tenantNs,
      labelSelector: `${managedByTagKey}=${managedByTagValue}`,
    });
    return made.items
      .flatMap((s) => Object.values((s as { data?: Record<string, string> }).data ?? {}))
      .map((v) => atob(v))
      .join("\n");
  }

  it("a tenant who may write Proxies but not get Secrets cannot have kubefn copy one to an instance, by create or by update", async () => {
    const stolenWord = `team-b-${suffix}`;
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "team-b-credentials", namespace: tenantNs },
      stringData: { "user-data": `#cloud-config\npassword: ${stolenWord}\n`, token: stolenWord },
    });
    // trent: `view` (no Secrets) plus Proxies, and `get` on one Secret of his own by name.
    const trent = await tenant(admin, {
      namespace: tenantNs,
      name: "trent",
      clusterRole: "view",
      rules: [
        {
          apiGroups: ["crawl.kubefn.dev"],
          resources: ["proxies"],
          verbs: ["get", "create", "update", "patch", "delete"],
        },
        { apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: ["trent-own"] },
      ],
    });
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "trent-own", namespace: tenantNs },
      stringData: { "user-data": "#cloud-config\n" },
    });
    await expect(
      trent.get(Resources.Secret, { namespace: tenantNs, name: "team-b-credentials" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    // Once his RBAC is in effect he may create Proxies, and name the Secret he may read.
    await createProxy(trent, "own", {
      mode: "Managed",
      provider: "kubernetes",
      cloudInit: { secretRef: { name: "trent-own" } },
    });

    const created = await refusedOrTaken(
      () =>
        trent.create<ProxyKube>(proxyResource, {
          apiVersion: "crawl.kubefn.dev/v1alpha1",
          kind: "Proxy",
          metadata: { name: "thief", namespace: tenantNs },
          spec: {
            mode: "Managed",
            provider: "kubernetes",
            cloudInit: { secretRef: { name: "team-b-credentials" } },
          },
        }),
      () => admin.delete(proxyResource, { namespace: tenantNs, name: "thief" }),
    );
    // Repointing his own Proxy (to another key of the same Secret, too) is the same theft.
    const updated = await refusedOrTaken(
      () =>
        trent.patch<ProxyKube>(
          proxyResource,
          { namespace: tenantNs, name: "own" },
          {
            type: "merge",
            body: { spec: { cloudInit: { secretRef: { name: "team-b-credentials", key: "token" } } } },
          },
        ),
      () =>
        admin
          .patch(
            proxyResource,
            { namespace: tenantNs, name: "own" },
            { type: "merge", body: { spec: { cloudInit: { secretRef: { name: "trent-own", key: null } } } } },
          )
          .then(() => {}),
    );
    // Whatever the API server took, kubefn now acts on.
    for (const [name, outcome] of [
      ["thief", created],
      ["own", updated],
    ] as const) {
      if (outcome instanceof Error) continue;
      await drive(name, async (p) => (await podsOwnedBy(p!.metadata.uid!)).length === 1);
    }
    expect(await bytesKubefnWrote()).not.toContain(stolenWord);
    for (const outcome of [created, updated]) {
      expect(outcome).toBeInstanceOf(ForbiddenError);
      expect((outcome as Error).message).toContain(`may not get Secret ${tenantNs}/team-b-credentials`);
    }
    // An edit that leaves the reference alone is not re-judged: the one who set it (here the
    // admin, on team B's Proxy) was allowed to.
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "team-b", namespace: tenantNs },
      spec: {
        mode: "Managed",
        provider: "kubernetes",
        cloudInit: { secretRef: { name: "team-b-credentials" } },
      },
    });
    const relabelled = await trent.patch<ProxyKube>(
      proxyResource,
      { namespace: tenantNs, name: "team-b" },
      { type: "merge", body: { metadata: { labels: { team: "b" } } } },
    );
    expect(relabelled.metadata.labels).toEqual({ team: "b" });
  });
});

describe("what kubefn's identity runs is the operator's choice", () => {
  it("a tenant's own image or machine type: no Pod is created, the Proxy is Failed with the reason", async () => {
    for (const [name, instance, reason] of [
      ["miner", { image: "evil.example/miner:1" }, "ImageNotAllowed"],
      ["big", { machineType: "a2-ultragpu-8g" }, "MachineTypeNotAllowed"],
    ] as const) {
      const proxy = await createProxy(mallory, name, { mode: "Managed", provider: "kubernetes", instance });
      const failed = await drive(name, (p) => p?.status?.phase === "Failed");
      const conditions = failed?.status?.conditions ?? [];
      expect(conditions.find((c) => c.type === "PermanentError")).toMatchObject({ status: "True", reason });
      expect(await podsOwnedBy(proxy.metadata.uid!)).toEqual([]);
      expect(JSON.stringify((await admin.list(Resources.Pod, { namespace: tenantNs })).items)).not.toContain(
        "evil.example",
      );
    }
  });
});

describe("probes go only where the operator allows", () => {
  it("an External endpoint on loopback, a private range or the metadata service is Failed with EndpointNotAllowed and a Warning Event, and never offered to crawlers", async () => {
    for (const [name, host] of [
      ["loop", "127.0.0.1"],
      ["intranet", "10.0.0.1"],
      ["imds", "169.254.169.254"],
      ["ula", "fd12:3456::1"],
    ] as const) {
      await createProxy(mallory, name, {
        mode: "External",
        endpoint: { host, port: 80, scheme: "http" },
        healthCheck: { probeURL: "http://example.com/" },
      });
      const p = await drive(name, (p) => p?.status?.phase === "Failed");
      expect(p?.status?.conditions?.find((c) => c.type === "PermanentError")).toMatchObject({
        status: "True",
        reason: "EndpointNotAllowed",
      });
      expect(p?.status?.ip).toBeUndefined();
      const events = await eventually(
        async () => {
          const listed = await admin.list<KubeObject & { type?: string; reason?: string }>(Resources.Event, {
            namespace: tenantNs,
            fieldSelector: `regarding.name=${name}`,
          });
          const warning = listed.items.find((e) => e.type === "Warning" && e.reason === "EndpointNotAllowed");
          return warning ? listed.items : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 200, what: `a Warning Event for ${name}` },
      );
      expect(events.length).toBeGreaterThan(0);
    }
    const api = discoveryRoutes(ctx, { apiToken: clusterWideCrawler });
    const res = await api.request(`/v1/proxies?namespace=${tenantNs}`, {
      headers: { authorization: "Bearer crawler-token-0123456789" },
    });
    const names = ((await res.json()) as { items: { name: string }[] }).items.map((i) => i.name);
    expect(names).not.toContain("loop");
  });
});

describe("status.providerID is not a pointer", () => {
  // Forged with kubefn's own token: no one else may write status (see "kubefn's record" below).
  it("forged to another namespace's Pod (or another Proxy's instance): no read, no delete, through spec edits and deletion", async () => {
    const proxy = await createProxy(mallory, "forger", { mode: "Managed", provider: "kubernetes" });
    await drive("forger", async (p) => Boolean(p?.status?.providerID));

    for (const target of [victimPod, lookalikePod]) {
      const forged = `kubernetes://${victimNs}/${target.metadata.name}`;
      await kubefn.patchStatus(
        proxyResource,
        { namespace: tenantNs, name: "forger" },
        { type: "merge", body: { status: { providerID: forged } } },
      );
      // Passes: the forged ID is looked up as "not this Proxy's", forgotten, and a real one made.
      const after = await drive("forger", (p) => p?.status?.providerID !== forged);
      expect(after?.status?.ip).not.toBe((target.status as { podIP?: string } | undefined)?.podIP ?? "never");
      await untouched(victimNs, target.metadata.name!, target.metadata.uid!);
    }

    // A spec edit (replacement) and the deletion with the forged ID in place.
    await kubefn.patchStatus(
      proxyResource,
      { namespace: tenantNs, name: "forger" },
      { type: "merge", body: { status: { providerID: `kubernetes://${victimNs}/database` } } },
    );
    await mallory.patch(
      proxyResource,
      { namespace: tenantNs, name: "forger" },
      { type: "merge", body: { spec: { instance: { image: "registry.example/other:2" } } } },
    );
    for (let i = 0; i < 5; i++) await runPass(ctx, registry, message("forger"));
    await untouched(victimNs, "database", victimPod.metadata.uid!);
    await kubefn.patchStatus(
      proxyResource,
      { namespace: tenantNs, name: "forger" },
      { type: "merge", body: { status: { providerID: `kubernetes://${victimNs}/px-lookalike` } } },
    );
    await mallory.delete(proxyResource, { namespace: tenantNs, name: "forger" });
    await drive("forger", (p) => p === undefined);
    await untouched(victimNs, "database", victimPod.metadata.uid!);
    await untouched(victimNs, "px-lookalike", lookalikePod.metadata.uid!);
    // The Proxy's own instance went with it (found by its owner tag, not by the forged ID).
    await eventually(async () => ((await podsOwnedBy(proxy.metadata.uid!)).length === 0 ? true : undefined), {
      what: "the Proxy's own Pod to go",
    });
  });
});

describe("spec.instance.labels cannot forge kubefn's tags", () => {
  it("a label that sanitises to the owner tag puts no other Proxy's UID on the instance, so a forged providerID cannot make that Proxy adopt it", async () => {
    // Another team's Proxy in the namespace, not yet given an instance.
    const victim = await createProxy(admin, "victim", { mode: "Managed", provider: "kubernetes" });
    // The exact key first (its value is replaced by the real tag), then one that sanitises to it.
    const mole = await createProxy(mallory, "mole", {
      mode: "Managed",
      provider: "kubernetes",
      instance: { labels: { [ownerTagKey]: "x", [`${ownerTagKey}-`]: victim.metadata.uid! } },
    });
    const moleID = `kubernetes://${tenantNs}/${nameFromUID(mole.metadata.uid!)}`;
    await drive("mole", (p) => p?.status?.providerID === moleID);
    const molePod = await admin.get(Resources.Pod, {
      namespace: tenantNs,
      name: nameFromUID(mole.metadata.uid!),
    });

    // The victim is pointed at mallory's instance (with kubefn's stolen token: only kubefn may
    // write proxies/status).
    await kubefn.patchStatus(
      proxyResource,
      { namespace: tenantNs, name: "victim" },
      { type: "merge", body: { status: { providerID: moleID } } },
    );
    const after = await drive(
      "victim",
      (p) => (Boolean(p?.status?.providerID) && p?.status?.providerID !== moleID) || Boolean(p?.status?.ip),
    );
    expect(after?.status?.providerID).not.toBe(moleID);
    expect(molePod.metadata.labels?.[ownerTagKey]).toBe(mole.metadata.uid);
    expect((await podsOwnedBy(victim.metadata.uid!)).map((p) => p.metadata.name)).not.toContain(
      molePod.metadata.name,
    );
  });
});

describe("a stale snapshot never causes a provider side effect", () => {
  it("does not delete a just-created replacement", async () => {
    const proxy = await createProxy(mallory, "replaced", { mode: "Managed", provider: "kubernetes" });
    await drive("replaced", (p) => p?.status?.phase === "Ready");
    const [first] = await podsOwnedBy(proxy.metadata.uid!);
    await mallory.patch(
      proxyResource,
      { namespace: tenantNs, name: "replaced" },
      { type: "merge", body: { spec: { instance: { image: "registry.example/forward-proxy:2" } } } },
    );
    // The sweep listed the Proxy right after the edit; its message arrives late.
    const stale = await getProxy("replaced");
    const replaced = await drive("replaced", async (p) => {
      const pods = await podsOwnedBy(proxy.metadata.uid!);
      return (
        p?.status?.phase === "Ready" && pods.length === 1 && pods[0]!.metadata.uid !== first!.metadata.uid
      );
    });
    expect(replaced).toBeDefined();
    const [replacement] = await podsOwnedBy(proxy.metadata.uid!);
    await runPass(ctx, registry, message("replaced", stale));
    await runPass(ctx, registry, message("replaced", stale));
    await untouched(tenantNs, replacement!.metadata.name!, replacement!.metadata.uid!);
  });

  it("does not create an instance for a Proxy already deleted", async () => {
    const proxy = await createProxy(mallory, "gone", { mode: "Managed", provider: "kubernetes" });
    // One pass adds the finalizer; the snapshot is taken before any instance exists.
    await drive("gone", (p) => (p?.metadata.finalizers?.length ?? 0) > 0);
    const stale = await getProxy("gone");
    await mallory.delete(proxyResource, { namespace: tenantNs, name: "gone" });
    await drive("gone", (p) => p === undefined);
    await runPass(ctx, registry, message("gone", stale));
    await sleep(300);
    expect(await podsOwnedBy(proxy.metadata.uid!)).toEqual([]);
  });
});

describe("health a tenant cannot forge", () => {
  it("a tenant with `edit` cannot mark an unprobed proxy healthy, and crawlers are never sent to it", async () => {
    const claimed = {
      instance: "198.51.100.9:3128",
      verdict: true,
      consecOK: 99,
      consecFail: 0,
      reported: { healthy: true, latencyMs: 1, at: new Date().toISOString() },
    };
    await createProxy(eve, "forged-health", {
      mode: "External",
      endpoint: { host: "198.51.100.9", port: 3128, scheme: "http" },
      healthCheck: { probeURL: "http://probe.example/" },
    });
    await eve.patch(
      proxyResource,
      { namespace: tenantNs, name: "forged-health" },
      {
        type: "merge",
        body: { metadata: { annotations: { [HEALTH_ANNOTATION]: JSON.stringify(claimed) } } },
      },
    );
    // Nor can she write the status, where the real probe history lives.
    await expect(
      eve.patchStatus(
        proxyResource,
        { namespace: tenantNs, name: "forged-health" },
        { type: "merge", body: { status: { health: encodeHealthState(claimed), phase: "Ready" } } },
      ),
    ).rejects.toBeInstanceOf(ForbiddenError);
    for (let i = 0; i < 3; i++) await runPass(ctx, registry, message("forged-health"));
    const p = await getProxy("forged-health");
    expect(p.status?.phase).not.toBe("Ready");
    expect(p.status?.conditions?.find((c) => c.type === "Healthy")?.status).not.toBe("True");

    const api = discoveryRoutes(ctx, { apiToken: clusterWideCrawler });
    const res = await api.request(`/v1/proxies?namespace=${tenantNs}`, {
      headers: { authorization: "Bearer crawler-token-0123456789" },
    });
    const names = ((await res.json()) as { items: { name: string }[] }).items.map((i) => i.name);
    expect(names).not.toContain("forged-health");
  });

  it("an External proxy without a health check is Ready (provisioned) but never offered to crawlers", async () => {
    await createProxy(eve, "unprobed", {
      mode: "External",
      endpoint: { host: "198.51.100.10", port: 3128, scheme: "http" },
    });
    await drive("unprobed", (p) => p?.status?.phase === "Ready");
    const api = discoveryRoutes(ctx, { apiToken: clusterWideCrawler });
    const res = await api.request(`/v1/proxies?namespace=${tenantNs}`, {
      headers: { authorization: "Bearer crawler-token-0123456789" },
    });
    const names = ((await res.json()) as { items: { name: string }[] }).items.map((i) => i.name);
    expect(names).not.toContain("unprobed");
  });
});

describe("kubefn's record is kubefn's: status and the spec-hash annotation", () => {
  const crawler = "crawler-token-0123456789";
  const offered = async () => {
    const api = discoveryRoutes(ctx, { apiToken: clusterWideCrawler });
    const res = await api.request(`/v1/proxies?namespace=${tenantNs}`, {
      headers: { authorization: `Bearer ${crawler}` },
    });
    return ((await res.json()) as { items: { name: string; ip: string }[] }).items;
  };

  it("a user granted proxies/status cannot make a dead Proxy Ready at an address of her choosing: crawlers are never sent there", async () => {
    // A probed Proxy whose probe never passed (nothing answers at its endpoint).
    await createProxy(mallory, "hijack", {
      mode: "External",
      endpoint: { host: "198.51.100.20", port: 3128, scheme: "http" },
      healthCheck: { probeURL: "http://probe.example/" },
    });
    // kubefn's own status writes are admitted (it is listed in kubefn-status-writers).
    await drive("hijack", (p) => Boolean(p?.status?.phase));
    const forged = {
      phase: "Ready",
      ip: "203.0.113.66",
      health: encodeHealthState({
        instance: "203.0.113.66:3128",
        verdict: true,
        consecOK: 99,
        consecFail: 0,
        reported: { healthy: true, latencyMs: 1, at: new Date().toISOString() },
      }),
    };
    const outcome = await refusedOrTaken(
      () =>
        mallory.patchStatus<ProxyKube>(
          proxyResource,
          { namespace: tenantNs, name: "hijack" },
          { type: "merge", body: { status: forged } },
        ),
      () => runPass(ctx, registry, message("hijack")).then(() => {}),
    );
    // What a crawler is handed right after her write (before any pass could undo it).
    expect((await offered()).map((i) => `${i.name}@${i.ip}`)).not.toContain("hijack@203.0.113.66");
    expect(outcome).toBeInstanceOf(ForbiddenError);
    expect((outcome as Error).message).toContain(
      `system:serviceaccount:${tenantNs}:mallory may not write the status of proxies ${tenantNs}/hijack`,
    );
    const stored = await getProxy("hijack");
    expect(stored.status?.ip).not.toBe("203.0.113.66");
    expect(stored.status?.phase).not.toBe("Ready");
  });

  it("nor a SubPool's status (granted subpools/status cluster-wide), nor a Proxy's spec-hash annotation; her own labels, annotations, spec edits and deletion still go through", async () => {
    const role = `status-writer-${suffix}`;
    await admin.create(Resources.ClusterRole, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: role },
      rules: [
        { apiGroups: ["subrelay.example.com"], resources: ["subpools/status"], verbs: ["get", "patch"] },
      ],
    });
    await admin.create(Resources.ClusterRoleBinding, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: role },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
      subjects: [{ kind: "ServiceAccount", name: "mallory", namespace: tenantNs }],
    });
    const pool = `pool-${suffix}`;
    await admin.create(subPoolResource, {
      apiVersion: "subrelay.example.com/v1alpha1",
      kind: "SubPool",
      metadata: { name: pool },
      spec: {
        exposure: { mode: "Internal" },
        storage: { size: "1Gi" },
        cpa: {
          image: "ghcr.io/subrelay/cpa:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
        cpaManager: {
          image: "ghcr.io/subrelay/cpa-manager:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
      },
    });
    try {
      const poolOutcome = await eventually(
        async () => {
          try {
            await mallory.patchStatus(
              subPoolResource,
              { name: pool },
              { type: "merge", body: { status: { namespace: "kube-system" } } },
            );
            return undefined; // taken: not yet refused (or the policy does not hold)
          } catch (err) {
            // Forbidden by RBAC until the binding is in effect; then by the policy, with its message.
            return err instanceof ForbiddenError && err.message.includes("may not write the status")
              ? err
              : undefined;
          }
        },
        { timeoutMs: 20_000, intervalMs: 250, what: "mallory's SubPool status write refused by the policy" },
      );
      expect(poolOutcome.message).toContain(`may not write the status of subpools ${pool}`);
    } finally {
      await admin.delete(subPoolResource, { name: pool }).catch(() => {});
      await admin.delete(Resources.ClusterRoleBinding, { name: role }).catch(() => {});
      await admin.delete(Resources.ClusterRole, { name: role }).catch(() => {});
    }

    await createProxy(mallory, "hashed", { mode: "Managed", provider: "kubernetes" });
    await drive("hashed", (p) => Boolean(p?.metadata.annotations?.[proxySpecHashAnnotation]));
    const hashOutcome = await refusedOrTaken(
      () =>
        mallory.patch<ProxyKube>(
          proxyResource,
          { namespace: tenantNs, name: "hashed" },
          { type: "merge", body: { metadata: { annotations: { [proxySpecHashAnnotation]: null } } } },
        ),
      () =>
        drive("hashed", (p) => Boolean(p?.metadata.annotations?.[proxySpecHashAnnotation])).then(() => {}),
    );
    expect(hashOutcome).toBeInstanceOf(ForbiddenError);
    expect((hashOutcome as Error).message).toContain(
      `may not add, change or remove the annotation crawl.kubefn.dev/spec-hash of Proxy ${tenantNs}/hashed`,
    );
    // What a kubectl user does with her Proxy is still hers.
    const edited = await mallory.patch<ProxyKube>(
      proxyResource,
      { namespace: tenantNs, name: "hashed" },
      {
        type: "merge",
        body: {
          metadata: { labels: { team: "m" }, annotations: { note: "mine" } },
          spec: { instance: { image: "registry.example/forward-proxy:3" } },
        },
      },
    );
    expect(edited.metadata.labels?.team).toBe("m");
    expect(edited.metadata.annotations?.note).toBe("mine");
    await mallory.delete(proxyResource, { namespace: tenantNs, name: "hashed" });
    await drive("hashed", (p) => p === undefined);
  });
});
