/**
 * kubefn's primaries as GitOps tools judge them, on the devcluster: real Proxies, SubPools and a
 * Site reconciled by the real controllers (`runPass`), read back with the cluster's kubectl —
 * `kubectl get kubefn` (the CRD category), `kubectl wait --for=condition=Ready` — and judged by
 * the tools' own code in test/kstatus: kstatus (Flux's health checks) and Argo CD's Lua health
 * scripts (infra/argocd) run in gopher-lua, Argo CD's interpreter.
 *
 * | object | what its pass writes | kstatus | Argo CD |
 * | --- | --- | --- | --- |
 * | External Proxy | Ready True | Current | Healthy |
 * | External Proxy, no probe verdict yet | Ready Unknown, Reconciling True | InProgress | Progressing |
 * | Managed Proxy, unknown provider | Ready False, Stalled True | Failed | Degraded |
 * | SubPool, StatefulSet starting | Ready False, Reconciling True | InProgress | Progressing |
 * | the same pool, running | Ready True | Current | Healthy |
 * | the same pool, suspend edited in, not yet seen | (observedGeneration behind) | InProgress | Progressing |
 * | the same pool, suspended | Ready False/Suspended, Suspended True | InProgress | Suspended |
 * | SubPool over the envelope | Ready False, Stalled True | Failed | Degraded |
 * | SubPool whose Namespace is someone else's | Ready False/NamespaceConflict | InProgress | Degraded |
 * | Site | Ready True/Reconciled | Current | Healthy |
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { proxyController } from "../../shared/controllers/proxy/controller.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { defaultSiteRegistry } from "../../shared/controllers/site/components/index.ts";
import { siteController } from "../../shared/controllers/site/controller.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { defaultOperatorConfig } from "../../shared/controllers/subpool/config.ts";
import { subPoolController } from "../../shared/controllers/subpool/controller.ts";
import { endpointSliceResource } from "../../shared/controllers/subpool/desired.ts";
import {
  type Condition,
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import {
  type Context,
  createRegistry,
  type PassResult,
  type Registry,
  type Request,
  runPass,
} from "../../shared/runtime/index.ts";
import { eventually, kubeConfig, kubectl } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { passContext } from "../support/pass-context.ts";
import { proxyResource } from "../support/proxies.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const kstatusBin = `${root}test/kstatus/bin/kstatus`;
const healthScripts = `${root}infra/argocd/health`;

const suffix = randomBytes(3).toString("hex");
const ns = `gitops-${suffix}`;
const names = {
  external: "external",
  awaitingProbe: "awaiting-probe",
  unknownProvider: "unknown-provider",
  pool: `gh-${suffix}`,
  overEnvelope: `gh-${suffix}-big`,
  conflict: `gh-${suffix}-taken`,
  site: `gh-${suffix}`,
};
const gatewayService = "gw";

let kube: Kube;
let registry: Registry;
let ctx: Context;

type Verdict = { status: string; message: string };
interface Judged {
  kind: string;
  namespace?: string;
  name: string;
  kstatus: Verdict;
  argocd?: Verdict;
}

const proxyKey = (name: string): Request => ({ controller: "proxy", namespace: ns, name });
const poolKey = (name: string): Request => ({ controller: "subpool", name });
const siteKey = (name: string): Request => ({ controller: "site", name });
const pass = (request: Request): Promise<PassResult> => runPass(ctx, registry, { request, attempt: 0 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** Runs test/kstatus on `json` (one object, a List or an array): one verdict per object. */
async function judge(json: string): Promise<Judged[]> {
  const r = await outputOf(spawn(kstatusBin, ["-health", healthScripts]), json);
  if (r.code !== 0) throw new Error(`kstatus: ${r.stderr}`);
  return r.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Judged);
}

/** kstatus and Argo CD on one object as `kubectl get -o json` prints it. */
async function judgeOne(args: string[]): Promise<string> {
  const [one] = await judge(await ok(["get", ...args, "-o", "json"]));
  return `${one!.kstatus.status}/${one!.argocd?.status}`;
}

async function create(resource: Resource, body: KubeObject): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await kube.create(resource, body);
      return;
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
}

function subPool(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
    kind: "SubPool",
    metadata: { name },
    spec: {
      exposure: { mode: "Internal" },
      storage: { size: "1Gi" },
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "100m", memory: "64Mi" } } },
      cpaManager: {
        image: "ghcr.io/subrelay/cpa-manager:1.4.0",
        resources: { requests: { cpu: "100m", memory: "64Mi" } },
      },
      ...spec,
    },
  };
}

const conditionsOf = (o: KubeObject) =>
  (o.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];

beforeAll(async () => {
  // The judge: built here so a fresh machine (CI) has it; cached by Go, about a second otherwise.
  await promisify(execFile)("bash", [`${root}scripts/build-kstatus.sh`]);
  kube = createKube(createNodeTransport(kubeConfig()));
  await installCrdsAndRbac(kube);
  registry = createRegistry([
    proxyController({ providers: {}, probeAllowList: loopbackProbeAllowList }),
    subPoolController({
      operatorConfig: { ...defaultOperatorConfig, proxyGateway: { namespace: ns, service: gatewayService } },
    }),
    siteController({
      registry: defaultSiteRegistry(),
      env: {
        config: {
          imageRegistry: "ghcr.io/unbounded",
          imageTag: "v0.1.24",
          apiServerEndpoint: "https://10.0.0.1:6443",
        },
      },
    }),
  ]);
  ctx = passContext(kube);
  await kube.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  // The shared proxy gateway the pools wait for: one ready endpoint, no Pod needed.
  await kube.create(endpointSliceResource, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${gatewayService}-1`,
      namespace: ns,
      labels: { "kubernetes.io/service-name": gatewayService },
    },
    addressType: "IPv4",
    endpoints: [{ addresses: ["10.0.0.9"], conditions: { ready: true } }],
    ports: [{ name: "http", port: 7890, protocol: "TCP" }],
  } as KubeObject);
  // Someone else's Namespace where a pool wants its own.
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: subPoolNamespaceName(names.conflict) },
  });
  await create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name: names.external, namespace: ns },
    spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128 } },
  });
  await create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name: names.awaitingProbe, namespace: ns },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: 3129 },
      // No sweep runs here, so no probe ever reports.
      healthCheck: { probeURL: "http://127.0.0.1:9/" },
    },
  });
  await create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name: names.unknownProvider, namespace: ns },
    spec: { mode: "Managed", provider: "nowhere" },
  });
  await create(subPoolResource, subPool(names.pool));
  await create(
    subPoolResource,
    subPool(names.overEnvelope, {
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "64", memory: "64Mi" } } },
    }),
  );
  await create(subPoolResource, subPool(names.conflict));
  await create(siteResource, {
    apiVersion: "unbounded-cloud.io/v1alpha3",
    kind: "Site",
    metadata: { name: names.site },
    spec: { displayName: "gitops health" },
  });
}, 180_000);

afterAll(async () => {
  if (!kube) return;
  const unfinalize = async (resource: Resource, key: { name: string; namespace?: string }) => {
    await kube
      .patch(resource, key, { type: "merge", body: { metadata: { finalizers: null } } })
      .catch(() => undefined);
    await kube.delete(resource, key).catch(() => undefined);
  };
  for (const name of [names.external, names.awaitingProbe, names.unknownProvider]) {
    await unfinalize(proxyResource, { namespace: ns, name });
  }
  for (const name of [names.pool, names.overEnvelope, names.conflict])
    await unfinalize(subPoolResource, { name });
  await kube.delete(siteResource, { name: names.site }).catch(() => undefined);
  // The Site-less pass takes the deleted Site out of the cluster components' config.
  await pass(siteKey(names.site)).catch(() => undefined);
  // Gone, not only deleting: a namespace still terminating is what the next file would meet.
  await removeNamespaces(
    kube,
    [ns, ...[names.pool, names.overEnvelope, names.conflict].map((name) => subPoolNamespaceName(name))],
    { dropFinalizers: true },
  );
}, 180_000);

describe("kubefn's primaries as kstatus (Flux) and Argo CD judge them", () => {
  it("`kubectl get kubefn` lists all three kinds (the CRD category), and `st` is the Site's short name", async () => {
    const listed = await ok(["get", "kubefn", "-A", "-o", "name"]);
    expect(listed).toContain(`proxy.crawl.kubefn.dev/${names.external}`);
    expect(listed).toContain(`subpool.subrelay.example.com/${names.pool}`);
    expect(listed).toContain(`site.unbounded-cloud.io/${names.site}`);
    expect(await ok(["get", "st", names.site, "-o", "name"])).toBe(`site.unbounded-cloud.io/${names.site}\n`);
  });

  it("a SubPool whose StatefulSet is starting is Progressing", async () => {
    await pass(poolKey(names.pool));
    await pass(poolKey(names.pool));
    const pool = await kube.get(subPoolResource, { name: names.pool });
    expect(conditionsOf(pool).find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      reason: "StatefulSetNotReady",
    });
    expect(await judgeOne(["subpool", names.pool])).toBe("InProgress/Progressing");
  });

  it("a Proxy whose health check has given no verdict yet is Progressing", async () => {
    await pass(proxyKey(names.awaitingProbe));
    const proxy = await kube.get(proxyResource, { namespace: ns, name: names.awaitingProbe });
    expect(
      conditionsOf(proxy)
        .filter((c) => c.type === "Ready" || c.type === "Reconciling")
        .map((c) => `${c.type}=${c.status}/${c.reason}`),
    ).toEqual(["Ready=Unknown/AwaitingHealthCheck", "Reconciling=True/AwaitingHealthCheck"]);
    expect(await judgeOne(["proxy", "-n", ns, names.awaitingProbe])).toBe("InProgress/Progressing");
  });

  it("`kubectl wait --for=condition=Ready` returns for each kind while kubefn reconciles them", async () => {
    const keys = [proxyKey(names.external), poolKey(names.pool), siteKey(names.site)];
    let driving = true;
    const driver = (async () => {
      while (driving) {
        for (const key of keys) await pass(key);
        await sleep(500);
      }
    })();
    try {
      const [proxy, pool, site] = await Promise.all([
        kubectl(["wait", "--for=condition=Ready", "--timeout=150s", "-n", ns, `proxy/${names.external}`]),
        kubectl(["wait", "--for=condition=Ready", "--timeout=150s", `subpool/${names.pool}`]),
        kubectl(["wait", "--for=condition=Ready", "--timeout=150s", `site/${names.site}`]),
      ]);
      expect([proxy.code, pool.code, site.code], `${proxy.stderr}${pool.stderr}${site.stderr}`).toEqual([
        0, 0, 0,
      ]);
    } finally {
      driving = false;
      await driver;
    }
  }, 180_000);

  it("broken ones stall (a permanent error) or degrade (a conflict that is retried), with the failing reason", async () => {
    const readyOf = async (
      resource: Resource,
      key: { name: string; namespace?: string },
      request: Request,
    ) => {
      await pass(request);
      await pass(request);
      const ready = conditionsOf(await kube.get(resource, key)).find((c) => c.type === "Ready");
      return `${ready?.status}/${ready?.reason}`;
    };
    expect(
      await readyOf(
        proxyResource,
        { namespace: ns, name: names.unknownProvider },
        proxyKey(names.unknownProvider),
      ),
    ).toBe("False/UnknownProvider");
    expect(await readyOf(subPoolResource, { name: names.overEnvelope }, poolKey(names.overEnvelope))).toBe(
      "False/ResourceEnvelopeExceeded",
    );
    expect(await readyOf(subPoolResource, { name: names.conflict }, poolKey(names.conflict))).toBe(
      "False/NamespaceConflict",
    );
  });

  it("every primary is judged from `kubectl get kubefn -o json`: Current/Healthy, Failed/Degraded, InProgress/Degraded", async () => {
    const judged = await judge(await ok(["get", "kubefn", "-A", "-o", "json"]));
    const verdict = (kind: string, name: string) => {
      const j = judged.find(
        (x) => x.kind === kind && x.name === name && (kind !== "Proxy" || x.namespace === ns),
      );
      return j && `${j.kstatus.status}/${j.argocd?.status}`;
    };
    expect({
      external: verdict("Proxy", names.external),
      unknownProvider: verdict("Proxy", names.unknownProvider),
      pool: verdict("SubPool", names.pool),
      overEnvelope: verdict("SubPool", names.overEnvelope),
      conflict: verdict("SubPool", names.conflict),
      site: verdict("Site", names.site),
    }).toEqual({
      external: "Current/Healthy",
      unknownProvider: "Failed/Degraded",
      pool: "Current/Healthy",
      overEnvelope: "Failed/Degraded",
      conflict: "InProgress/Degraded",
      site: "Current/Healthy",
    });
    const failed = judged.find((x) => x.name === names.unknownProvider && x.namespace === ns);
    expect(failed?.argocd?.message).toMatch(/^UnknownProvider: no provider named "nowhere"/);
  });

  it("every condition carries the generation it was set at, and a converged pass writes nothing", async () => {
    const objects: [Resource, { name: string; namespace?: string }, Request][] = [
      [proxyResource, { namespace: ns, name: names.external }, proxyKey(names.external)],
      [proxyResource, { namespace: ns, name: names.unknownProvider }, proxyKey(names.unknownProvider)],
      [subPoolResource, { name: names.pool }, poolKey(names.pool)],
      [subPoolResource, { name: names.overEnvelope }, poolKey(names.overEnvelope)],
      [subPoolResource, { name: names.conflict }, poolKey(names.conflict)],
      [siteResource, { name: names.site }, siteKey(names.site)],
    ];
    for (const [resource, key, request] of objects) {
      const object = await kube.get(resource, key);
      const generation = object.metadata.generation;
      expect((object.status as { observedGeneration?: number }).observedGeneration).toBe(generation);
      const stamps = conditionsOf(object).map((c) => `${c.type}@${c.observedGeneration}`);
      expect(stamps, key.name).toEqual(conditionsOf(object).map((c) => `${c.type}@${generation}`));
      expect(stamps).toContain(`Ready@${generation}`);
      expect((await pass(request)).wroteStatus, key.name).toBe(false);
    }
  });

  it("suspending the running pool: Progressing until kubefn sees the edit, then Suspended", async () => {
    await ok(["patch", "subpool", names.pool, "--type", "merge", "-p", '{"spec":{"suspend":true}}']);
    // Not reconciled yet: status.observedGeneration is behind metadata.generation.
    expect(await judgeOne(["subpool", names.pool])).toBe("InProgress/Progressing");
    await pass(poolKey(names.pool));
    const pool = await kube.get(subPoolResource, { name: names.pool });
    expect(
      conditionsOf(pool)
        .filter((c) => c.type === "Ready" || c.type === "Suspended")
        .map((c) => `${c.type}=${c.status}/${c.reason}`),
    ).toEqual(["Ready=False/Suspended", "Suspended=True/Suspended"]);
    expect(await judgeOne(["subpool", names.pool])).toBe("InProgress/Suspended");
    await eventually(async () => ((await pass(poolKey(names.pool))).wroteStatus ? undefined : true), {
      timeoutMs: 30_000,
      intervalMs: 500,
      what: "the suspended pool to settle",
    });
  });
});
