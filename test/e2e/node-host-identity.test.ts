/**
 * The Node host's identity renews itself, against the run's devcluster with the real
 * authentication path: in a Pod (no KUBECONFIG, KUBERNETES_SERVICE_HOST set, a ServiceAccount
 * volume laid out as the kubelet writes it) it reconciles as kubefn-system/kubefn and survives a
 * rotated token whose predecessor is revoked at once; out of the cluster, a kubeconfig whose user
 * is an exec credential plugin is re-run as its credentials expire. Also: infra/host/deployment.yaml
 * passes the API server's dry run and gives the host what it reads.
 *
 * Tokens are revoked by binding them to a Secret (TokenRequest `boundObjectRef`) and deleting it;
 * the API server caches a successful authentication for up to 10 s, so each revocation is waited
 * for until the old token is refused.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { nodeHostEnvSchema, parseNodeHostEnv } from "../../functions/node/config.ts";
import { asServiceAccount, installCrdsAndRbac } from "../../functions/node/install.ts";
import { settingsVariables } from "../../shared/app/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import {
  createKube,
  errorFromResponse,
  findCondition,
  isNotFound,
  type Kube,
  type KubeObject,
  listAll,
  Resources,
  type Transport,
} from "../../shared/kube/index.ts";
import { createNodeTransport, inClusterConnection, tokenFileSource } from "../../shared/kube/node.ts";
import { clusterInfo, kubeConfig } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { type ExecPluginKubeconfig, execPluginKubeconfig } from "../support/exec-plugin.ts";
import { podEnv as podEnvAt, serviceAccountVolume as podVolume } from "../support/service-account-volume.ts";
import { tempDir } from "../support/temp-dir.ts";
import {
  eventually,
  type HostProcess,
  imageCommand,
  imageEntrypoint,
  type LogLine,
  startHost,
} from "./host.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const kubefnUser = "system:serviceaccount:kubefn-system:kubefn";
const run = randomBytes(3).toString("hex");

type ProxyObject = KubeObject & { status?: { conditions?: Array<Record<string, string>> } };

let admin: Kube;
let adminTransport: Transport;
let caPem: string;

beforeAll(async () => {
  const kc = kubeConfig();
  adminTransport = createNodeTransport(kc);
  admin = createKube(adminTransport);
  await installCrdsAndRbac(admin);
  const cluster = kc.getCurrentCluster();
  caPem = cluster?.caData
    ? Buffer.from(cluster.caData, "base64").toString("utf8")
    : readFileSync(String(cluster?.caFile), "utf8");
}, 120_000);

/** A Secret in kubefn-system and a 600 s token for kubefn-system/kubefn bound to it: deleting the Secret revokes the token. */
async function boundToken(): Promise<{ token: string; secret: string }> {
  const secret = await admin.create(Resources.Secret, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      generateName: `kubefn-identity-${run}-`,
      namespace: "kubefn-system",
      labels: { "kubefn.dev/identity-test": run },
    },
  });
  const res = await adminTransport.request({
    method: "POST",
    path: "/api/v1/namespaces/kubefn-system/serviceaccounts/kubefn/token",
    contentType: "application/json",
    body: JSON.stringify({
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: {
        expirationSeconds: 600,
        boundObjectRef: {
          apiVersion: "v1",
          kind: "Secret",
          name: secret.metadata.name,
          uid: secret.metadata.uid,
        },
      },
    }),
  });
  if (res.status !== 201) throw errorFromResponse(res);
  const token = (JSON.parse(res.body) as { status: { token: string } }).status.token;
  return { token, secret: String(secret.metadata.name) };
}

/** Whom the API server takes `token` for (a SelfSubjectReview), or its status when it refuses. */
async function whoIs(token: string): Promise<string | number> {
  const res = await createNodeTransport(asServiceAccount(kubeConfig(), token)).request({
    method: "POST",
    path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    contentType: "application/json",
    body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
  });
  if (res.status !== 201) return res.status;
  return String(
    (JSON.parse(res.body) as { status: { userInfo: { username: string } } }).status.userInfo.username,
  );
}

/** Deletes the Secret `token` is bound to and waits until the API server refuses the token. */
async function revoke(secret: string, token: string): Promise<void> {
  await admin.delete(Resources.Secret, { namespace: "kubefn-system", name: secret });
  await eventually(
    "the old token refused",
    async () => ((await whoIs(token)) === 401 ? true : undefined),
    30_000,
  );
}

const serviceAccountVolume = () => podVolume(() => caPem);
const podEnv = (dir: string) => podEnvAt(clusterInfo().server, dir);

const external = (namespace: string, name: string): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" } },
});

const provisioned = (p: ProxyObject) =>
  findCondition(p.status?.conditions as never, "Provisioned")?.status === "True";

async function newNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${run}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  return name;
}

/** Creates External Proxies in `ns` and waits until the host has provisioned every one. */
async function provisionProxies(ns: string, names: string[]): Promise<void> {
  for (const n of names) await admin.create(proxyResource, external(ns, n));
  await eventually(`${names.join(", ")} Provisioned`, async () => {
    const items = await listAll<ProxyObject>(admin, proxyResource, { namespace: ns });
    const ready = items.filter((p) => names.includes(String(p.metadata.name)) && provisioned(p));
    return ready.length === names.length ? true : undefined;
  });
}

/** Deletes `ns` while the host still runs (it removes its Proxies' finalizers) and waits until it is gone. */
async function releaseNamespace(ns: string): Promise<void> {
  await admin.delete(Resources.Namespace, { name: ns }).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
  await eventually(
    `namespace ${ns} gone`,
    async () => {
      try {
        await admin.get(Resources.Namespace, { name: ns });
        return undefined;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    },
    90_000,
  );
}

/** Lines of a failed pass, sweep or request, and lines that speak of a refused credential. */
function failures(lines: LogLine[]): LogLine[] {
  return lines.filter((l) => l.level === "error" || /Unauthorized/.test(JSON.stringify(l)));
}

async function deleteTestSecrets(label: string): Promise<void> {
  const left = await listAll(admin, Resources.Secret, { namespace: "kubefn-system", labelSelector: label });
  for (const s of left)
    await admin.delete(Resources.Secret, { namespace: "kubefn-system", name: s.metadata.name! });
}

describe("the Node host in a Pod: the ServiceAccount volume", () => {
  const volume = serviceAccountVolume();
  let host: HostProcess;
  let current: { token: string; secret: string };
  let ns: string;

  beforeAll(async () => {
    current = await boundToken();
    volume.publish(current.token);
    volume.link();
    ns = await newNamespace("pod-identity");
    host = await startHost({
      ...podEnv(volume.dir),
      KUBEFN_SWEEP_SECONDS: "1",
      KUBEFN_PROXY_RESYNC_SECONDS: "60",
    });
  }, 240_000);

  afterAll(async () => {
    if (ns) await releaseNamespace(ns);
    if (host) expect(await host.stop()).toBe(0);
    await deleteTestSecrets(`kubefn.dev/identity-test=${run}`);
  }, 180_000);

  it("reconciles as system:serviceaccount:kubefn-system:kubefn, with the Pod's server, CA and namespace", async () => {
    const pod = await host.waitFor((l) => l.msg === "in cluster");
    expect(pod).toMatchObject({ server: clusterInfo().server, namespace: "kubefn-system" });
    await host.waitFor((l) => l.msg === `reconciling as ${kubefnUser}`);
    expect(host.lines.some((l) => l.level === "warn" && /SELF_USERNAMES/.test(l.msg))).toBe(false);
    await provisionProxies(ns, ["a", "b"]);
    // The API server's own record of who wrote the status.
    const writers = await eventually("status writes in the audit log", async () => {
      const res = await fetch(`${clusterInfo().auditCollector}/events`);
      const { events } = (await res.json()) as {
        events: Array<{ verb: string; user?: { username?: string }; objectRef?: Record<string, string> }>;
      };
      const mine = events.filter(
        (e) =>
          e.objectRef?.resource === "proxies" &&
          e.objectRef.namespace === ns &&
          e.objectRef.subresource === "status",
      );
      return mine.length > 0 ? new Set(mine.map((e) => e.user?.username)) : undefined;
    });
    expect([...writers]).toEqual([kubefnUser]);
    expect(failures(host.lines)).toEqual([]);
  });

  it("a new token written and the old one revoked at once: passes keep succeeding, no request refused", async () => {
    const from = host.lines.length;
    const next = await boundToken();
    volume.publish(next.token);
    await revoke(current.secret, current.token);
    current = next;
    const revokedAt = host.lines.length;
    await provisionProxies(ns, ["c", "d", "e"]);
    // Three more sweeps after the revocation (each one lists every kind with the token).
    await eventually("three sweeps after the revocation", async () =>
      host.lines.slice(revokedAt).filter((l) => l.msg === "sweep").length >= 3 ? true : undefined,
    );
    const after = host.lines.slice(revokedAt);
    const passes = after.filter((l) => l.msg === "pass");
    console.log(
      `rotation: ${passes.length} passes and ${after.filter((l) => l.msg === "sweep").length} sweeps after the revocation, ${failures(host.lines.slice(from)).length} failures`,
    );
    expect(passes.length).toBeGreaterThanOrEqual(3);
    expect(passes.filter((l) => l.result === "error")).toEqual([]);
    expect(failures(host.lines.slice(from))).toEqual([]);
  });

  it("the image's process (main.ts bundled by the Containerfile's build step, run by its ENTRYPOINT) starts in the Pod's environment", async () => {
    const containerfile = readFileSync(`${root}infra/host/Containerfile`, "utf8");
    expect(containerfile).toMatch(/^RUN bash scripts\/bundle-host\.sh dist\/functions\/node\/main\.mjs$/m);
    expect(containerfile).toContain("COPY --from=build /src/dist/functions/node/ ./functions/node/");
    const dir = tempDir("kubefn-image-");
    try {
      const image = await imageCommand(dir.path);
      expect(image.args).toEqual(imageEntrypoint().slice(1));
      expect(image.args.at(-1)).toBe("functions/node/main.mjs");
      const child = spawn(process.execPath, image.args, {
        cwd: image.cwd,
        env: {
          PATH: process.env.PATH ?? "",
          ...image.env,
          ...podEnv(volume.dir),
          KUBEFN_PORT: "0",
          KUBEFN_LOG_FORMAT: "json",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const exited = outputOf(child);
      let stdout = "";
      // outputOf set the encoding: chunks arrive as strings.
      child.stdout?.on("data", (c: string) => {
        stdout += c;
      });
      const msgs = () =>
        stdout
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => (JSON.parse(l) as LogLine).msg);
      try {
        await eventually("the bundle listening as kubefn", async () =>
          msgs().includes(`reconciling as ${kubefnUser}`) && msgs().includes("listening") ? true : undefined,
        );
      } finally {
        child.kill("SIGINT");
      }
      expect((await exited).code).toBe(0);
    } finally {
      dir.remove();
    }
  });

  it("the probe path of infra/host/deployment.yaml answers 200 on the running host", async () => {
    const container = deploymentContainer();
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      const res = await fetch(`${host.url}${probe?.httpGet?.path}`);
      expect(res.status).toBe(200);
    }
  });
});

describe("the scenario is sharp: client-node's own token file provider", () => {
  it("sends the revoked token for up to a minute (401), where kubefn's token source has already moved on", async () => {
    const volume = serviceAccountVolume();
    const first = await boundToken();
    volume.publish(first.token);
    volume.link();
    const ours = inClusterConnection({ ...inClusterOptions(volume.dir) });
    // client-node's in-cluster user (what loadFromCluster sets up), over the same cluster and CA.
    const theirs = new KubeConfig();
    theirs.loadFromOptions({
      clusters: ours.kc.clusters,
      users: [
        {
          name: "pod",
          authProvider: { name: "tokenFile", config: { tokenFile: join(volume.dir, "token") } },
        },
      ],
      contexts: [{ name: "pod", cluster: "in-cluster", user: "pod" }],
      currentContext: "pod",
    });
    const review = (t: Transport) =>
      t.request({
        method: "POST",
        path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        contentType: "application/json",
        body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
      });
    const kubefnTransport = createNodeTransport(ours.kc, { tokenSource: ours.tokenSource });
    const clientNodeTransport = createNodeTransport(theirs);
    expect((await review(kubefnTransport)).status).toBe(201);
    expect((await review(clientNodeTransport)).status).toBe(201);
    const second = await boundToken();
    volume.publish(second.token);
    await revoke(first.secret, first.token);
    expect((await review(clientNodeTransport)).status).toBe(401);
    expect((await review(kubefnTransport)).status).toBe(201);
    // The connection's KubeConfig alone (for client-node's own clients and watches) follows the file too.
    expect((await review(createNodeTransport(ours.kc))).status).toBe(201);
    // The same with the source's periodic look at the file kept out of the way: the 401 alone renews.
    const third = await boundToken();
    const slow = tokenFileSource(join(volume.dir, "token"), { recheckMs: 3_600_000 });
    const slowTransport = createNodeTransport(ours.kc, { tokenSource: slow });
    expect((await review(slowTransport)).status).toBe(201);
    volume.publish(third.token);
    await revoke(second.secret, second.token);
    expect((await review(slowTransport)).status).toBe(201);
    await admin.delete(Resources.Secret, { namespace: "kubefn-system", name: third.secret });
  }, 120_000);
});

describe("the Node host out of the cluster: an exec credential plugin", () => {
  let host: HostProcess;
  let ns: string;
  const label = `exec-${run}`;
  const dir = tempDir("kubefn-exec-").path;
  let plugin: ExecPluginKubeconfig;

  beforeAll(async () => {
    plugin = execPluginKubeconfig(dir, {
      server: clusterInfo().server,
      caPem,
      adminToken: clusterInfo().adminToken,
      label,
      lifetimeSeconds: 4,
    });
    ns = await newNamespace("exec-identity");
    host = await startHost({
      KUBECONFIG: plugin.kubeconfig,
      KUBEFN_SWEEP_SECONDS: "1",
      KUBEFN_PROXY_RESYNC_SECONDS: "60",
    });
  }, 240_000);

  afterAll(async () => {
    if (ns) await releaseNamespace(ns);
    if (host) expect(await host.stop()).toBe(0);
    await deleteTestSecrets(`kubefn.dev/exec-plugin-test=${label}`);
  }, 180_000);

  const pluginRuns = () => plugin.runs();

  it("reconciles as the plugin's identity and re-runs the plugin as each credential expires, every earlier one revoked", async () => {
    await host.waitFor((l) => l.msg === `reconciling as ${kubefnUser}`);
    await provisionProxies(ns, ["a"]);
    const start = pluginRuns();
    const from = host.lines.length;
    // Three more credentials, each revoking the one before the last, while the sweep runs every second.
    await eventually(
      "three more plugin runs",
      async () => (pluginRuns() >= start + 3 ? true : undefined),
      60_000,
    );
    await provisionProxies(ns, ["b", "c"]);
    const after = host.lines.slice(from);
    console.log(
      `exec plugin: ${pluginRuns()} runs, ${after.filter((l) => l.msg === "pass").length} passes and ${after.filter((l) => l.msg === "sweep").length} sweeps across the last ${pluginRuns() - start}, ${failures(after).length} failures`,
    );
    expect(after.filter((l) => l.msg === "pass" && l.result === "error")).toEqual([]);
    expect(failures(host.lines)).toEqual([]);
  });

  it("a credential revoked long before its expiry: the 401 runs the plugin again, no pass fails", async () => {
    // From the next run on, each credential claims an hour: only a 401 makes the host ask again.
    writeFileSync(plugin.lifetime, "3600");
    const before = pluginRuns();
    await eventually(
      "a run claiming an hour",
      async () => (pluginRuns() > before ? true : undefined),
      30_000,
    );
    await new Promise((r) => setTimeout(r, 5_000)); // any credential claiming 4 s has expired by now
    const longLived = pluginRuns();
    const from = host.lines.length;
    // Every credential minted so far, whichever one the host holds.
    await deleteTestSecrets(`kubefn.dev/exec-plugin-test=${label}`);
    // Refused once the API server's 10 s cache of the token's last success has lapsed; the sweep
    // sends a request every second, so the host meets the 401 within moments of it.
    await eventually("the plugin run again after the 401", async () =>
      pluginRuns() > longLived ? true : undefined,
    );
    await provisionProxies(ns, ["d", "e"]);
    const after = host.lines.slice(from);
    console.log(
      `exec plugin, revoked: ${pluginRuns() - longLived} run(s) after the revocation, ${after.filter((l) => l.msg === "pass").length} passes, ${failures(after).length} failures`,
    );
    expect(after.filter((l) => l.msg === "pass" && l.result === "error")).toEqual([]);
    expect(failures(after)).toEqual([]);
  });
});

/** The kubefn container of infra/host/deployment.yaml. */
interface Probe {
  httpGet?: { path?: string; port?: string | number };
}
interface Container {
  name: string;
  image: string;
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  securityContext?: Record<string, unknown>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface PodSpec {
  serviceAccountName?: string;
  topologySpreadConstraints?: unknown[];
  automountServiceAccountToken?: boolean;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  volumes?: Array<{ name: string; projected?: { sources: Array<Record<string, unknown>> } }>;
}

function deploymentManifests(): KubeObject[] {
  return parseAllDocuments(readFileSync(`${root}infra/host/deployment.yaml`, "utf8")).map(
    (d) => d.toJSON() as KubeObject,
  );
}

function podSpec(): PodSpec {
  const deployment = deploymentManifests().find((o) => o.kind === "Deployment");
  return (deployment as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
}

function deploymentContainer(): Container {
  const container = podSpec().containers.find((c) => c.name === "kubefn");
  if (!container) throw new Error("no kubefn container in infra/host/deployment.yaml");
  return container;
}

function inClusterOptions(dir: string) {
  const server = new URL(clusterInfo().server);
  return { host: server.hostname, port: Number(server.port), serviceAccountDir: dir };
}

describe("infra/host/deployment.yaml", () => {
  const kubectl = (args: string[], input?: string) =>
    outputOf(
      spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", clusterInfo().kubeconfig, ...args]),
      input ?? "",
    );

  it("passes the API server's dry run with `kubectl apply -k infra/host/`", async () => {
    const out = await kubectl(["apply", "--dry-run=server", "-k", `${root}infra/host`]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("deployment.apps/kubefn created (server dry run)");
    expect(out.stdout).toContain("service/kubefn created (server dry run)");
    expect(out.stdout).toContain("poddisruptionbudget.policy/kubefn created (server dry run)");
  });

  it("lets a drain take one host at a time without blocking a single replica, spreads them over nodes, and shows why a start failed", () => {
    type Selector = { matchLabels: Record<string, string> };
    const pdb = deploymentManifests().find((o) => o.kind === "PodDisruptionBudget") as
      | (KubeObject & { spec: { maxUnavailable?: number; minAvailable?: number; selector: Selector } })
      | undefined;
    const deployment = deploymentManifests().find((o) => o.kind === "Deployment") as unknown as {
      spec: {
        replicas: number;
        strategy?: unknown;
        selector: Selector;
        template: { metadata: { labels: Record<string, string> } };
      };
    };
    const matches = (labels: Record<string, string>, selector: Selector) =>
      Object.entries(selector.matchLabels).every(([k, v]) => labels[k] === v);
    expect(pdb?.metadata.namespace).toBe("kubefn-system");
    // maxUnavailable, not minAvailable: with host.replicas 1 a minAvailable of 1 would block every drain.
    expect(pdb?.spec).toMatchObject({ maxUnavailable: 1 });
    expect(pdb?.spec.minAvailable).toBeUndefined();
    expect(deployment.spec.replicas).toBeGreaterThan(1);
    // The replicas spread over nodes where there are several, without refusing a single node.
    expect(podSpec().topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: pdb?.spec.selector,
      },
    ]);
    // A rollout whose new Pods cannot start stops no running one.
    expect(deployment.spec.strategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    // It covers the host's Pods and nothing else of kubefn-system (the relay's are not the host's).
    expect(pdb?.spec.selector).toEqual(deployment.spec.selector);
    expect(matches(deployment.spec.template.metadata.labels, pdb!.spec.selector)).toBe(true);
    expect(matches({ "app.kubernetes.io/name": "kubefn-relay" }, pdb!.spec.selector)).toBe(false);
    // A bad setting exits 2 naming each variable on stderr (test/e2e/node-host.test.ts): with this
    // policy the kubelet keeps the end of that output as the termination message.
    expect((deploymentContainer() as { terminationMessagePolicy?: string }).terminationMessagePolicy).toBe(
      "FallbackToLogsOnError",
    );
  });

  it("its Pod is admitted where the restricted Pod Security Standard is enforced", async () => {
    const name = `restricted-${run}`;
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name, labels: { "pod-security.kubernetes.io/enforce": "restricted" } },
    });
    try {
      await admin.create(Resources.ServiceAccount, {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "kubefn", namespace: name },
      });
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "kubefn", namespace: name },
        spec: podSpec(),
      };
      const admitted = await kubectl(["create", "--dry-run=server", "-f", "-"], JSON.stringify(pod));
      expect(admitted.stderr).toBe("");
      expect(admitted.stdout).toContain("pod/kubefn created (server dry run)");
      // The check bites: the same Pod with privilege escalation allowed is refused.
      const [container] = pod.spec.containers;
      const loose = {
        ...pod,
        spec: {
          ...pod.spec,
          containers: [
            {
              ...container,
              securityContext: { ...container?.securityContext, allowPrivilegeEscalation: true },
            },
          ],
        },
      };
      const refused = await kubectl(["create", "--dry-run=server", "-f", "-"], JSON.stringify(loose));
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/violates PodSecurity "restricted/);
    } finally {
      await admin.delete(Resources.Namespace, { name });
    }
  });

  it("gives the host what it reads: its variables, the ServiceAccount volume where it looks, its own port", () => {
    const spec = podSpec();
    const container = deploymentContainer();
    expect(spec.serviceAccountName).toBe("kubefn");
    expect(spec.automountServiceAccountToken).toBe(false);
    const version = (JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { version: string }).version;
    expect(container.image).toMatch(new RegExp(`:${version.replaceAll(".", "\\.")}$`));
    // Every variable is one the host reads (its own, a shared setting with or without KUBEFN_, or glibc's).
    const known = new Set([
      ...Object.keys(nodeHostEnvSchema.def.shape),
      ...Object.keys(settingsVariables).flatMap((n) => [n, `KUBEFN_${n}`]),
      "MALLOC_ARENA_MAX",
    ]);
    const names = (container.env ?? []).map((e) => e.name);
    expect(names.filter((n) => !known.has(n))).toEqual([]);
    // What the host makes of it in a Pod (the kubelet adds KUBERNETES_SERVICE_*; secrets unset).
    const env = Object.fromEntries(
      (container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
    );
    const config = parseNodeHostEnv({
      ...env,
      KUBERNETES_SERVICE_HOST: "10.96.0.1",
      KUBERNETES_SERVICE_PORT: "443",
    });
    expect(config.kubeconfig).toBeUndefined();
    expect(config.host).toBe("0.0.0.0");
    const http = container.ports?.find((p) => p.name === "http");
    expect(config.port).toBe(http?.containerPort);
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      expect(probe?.httpGet?.port).toBe("http");
    }
    const mount = container.volumeMounts?.find((m) => m.mountPath === config.inCluster?.serviceAccountDir);
    expect(mount?.readOnly).toBe(true);
    const volume = spec.volumes?.find((v) => v.name === mount?.name);
    const paths = (volume?.projected?.sources ?? []).flatMap((s) => {
      const source = s as {
        serviceAccountToken?: { path: string; expirationSeconds?: number; audience?: string };
        configMap?: { name: string; items: Array<{ key: string; path: string }> };
        downwardAPI?: { items: Array<{ path: string; fieldRef: { fieldPath: string } }> };
      };
      if (source.serviceAccountToken) {
        // The API server's own audience; an hour, rotated by the kubelet at 80 %.
        expect(source.serviceAccountToken.audience).toBeUndefined();
        expect(source.serviceAccountToken.expirationSeconds).toBe(3600);
        return [source.serviceAccountToken.path];
      }
      if (source.configMap) {
        expect(source.configMap.name).toBe("kube-root-ca.crt");
        return source.configMap.items.map((i) => i.path);
      }
      return (source.downwardAPI?.items ?? []).map((i) => {
        expect(i.fieldRef.fieldPath).toBe("metadata.namespace");
        return i.path;
      });
    });
    expect(paths.sort()).toEqual(["ca.crt", "namespace", "token"]);
    const sc = container.securityContext ?? {};
    expect(sc).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(container.resources?.requests?.memory).toBeDefined();
    expect(container.resources?.limits?.memory).toBeDefined();
    // The image runs the bundle of functions/node/main.ts, where main.ts sits.
    const containerfile = readFileSync(`${root}infra/host/Containerfile`, "utf8");
    expect(containerfile).toMatch(/^FROM node:24/m);
    expect(containerfile).toContain("npm ci --omit=dev");
    expect(containerfile).toContain("RUN bash scripts/bundle-host.sh ");
    expect(readFileSync(`${root}scripts/bundle-host.sh`, "utf8")).toContain("esbuild functions/node/main.ts");
    expect(parseYaml(readFileSync(`${root}infra/host/kustomization.yaml`, "utf8"))).toEqual({
      apiVersion: "kustomize.config.k8s.io/v1beta1",
      kind: "Kustomization",
      // The host's NetworkPolicy comes with it: /metrics reachable only from a scraper's namespace.
      resources: ["deployment.yaml", "network-policy.yaml"],
    });
  });
});
