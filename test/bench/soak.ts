/**
 * `npm run bench -- soak`: kubefn left running across its credentials' expiries, with nobody
 * renewing anything. Each subject gets a devcluster of its own, whose ServiceAccount tokens live
 * 10 minutes (the least a TokenRequest may ask for), and a small fleet: External Proxies probed
 * through a local forward proxy every 30 s, one of them changed each minute (a pass that writes;
 * no event source runs, so the drift sweep, every minute here, finds it).
 *
 * Subjects (the Node host, in the cluster and out of it):
 * - `in-cluster`: the host in a "Pod" (no KUBECONFIG, KUBERNETES_SERVICE_*, a ServiceAccount
 *   volume laid out as the kubelet's): the bench plays the kubelet, writing a fresh 10-minute token
 *   at 80 % of the last one's life; the old one simply expires.
 * - `exec-plugin`: a kubeconfig whose user is a client.authentication.k8s.io exec plugin
 *   (test/fixtures/exec-plugin/mint-token.mjs, as `aws eks get-token` is) minting 10-minute tokens
 *   and claiming 9, each run revoking all but the last two.
 *
 * Printed per subject: passes that failed for authentication (the goal is 0) beside all passes and
 * failed passes, the API server's own count of refused authentications
 * (`authentication_attempts{result="failure"}`: every request kubefn sent with a dead token),
 * the expiries crossed, the renewals and the requests each cost kubefn.
 *
 * `KUBEFN_BENCH_SOAK_MINUTES` (default 35: three expiries) and `KUBEFN_BENCH_SOAK_PROXIES`
 * (default 10) size it.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startDevcluster } from "../../functions/node/dev/devcluster.ts";
import { installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import {
  createKube,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
  type Transport,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually, type HostProcess, type LogLine, startHost } from "../e2e/host.ts";
import { execPluginKubeconfig } from "../support/exec-plugin.ts";
import { startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";
import { podEnv, serviceAccountVolume } from "../support/service-account-volume.ts";
import { tempDir } from "../support/temp-dir.ts";
import type { BenchRow } from "./cluster.ts";

const TOKEN_SECONDS = 600;
const KUBELET_ROTATE_SECONDS = TOKEN_SECONDS * 0.8;
const EXEC_CLAIM_SECONDS = 540;
const CHANGE_EVERY_MS = 60_000;
const INTERVAL_SECONDS = 30;
/** No event source runs here: the drift sweep finds each minute's change within a minute. */
const HOST_ENV = { KUBEFN_PROXY_RESYNC_SECONDS: "60" };
const _plugin = fileURLToPath(new URL("../fixtures/exec-plugin/mint-token.mjs", import.meta.url));

interface SoakCluster {
  admin: Kube;
  adminTransport: Transport;
  server: string;
  caPem: string;
  adminToken: string;
  stop(): Promise<void>;
}

interface Subject {
  name: string;
  host: HostProcess;
  /** Renewals so far (tokens written, plugin runs). */
  renewals(): number;
  /** What a renewal costs kubefn in API requests, and why. */
  renewalCost: string;
  stop(): Promise<void>;
}

interface SoakResult {
  subject: string;
  minutes: number;
  expiries: number;
  renewals: number;
  passes: number;
  failedPasses: number;
  authFailedPasses: number;
  refusedRequests: number;
  unauthorizedLines: number;
  converged: boolean;
  renewalCost: string;
}

async function soakCluster(): Promise<SoakCluster> {
  const dc = await startDevcluster();
  const kc = loadKubeConfig({ file: dc.info.kubeconfig });
  const adminTransport = createNodeTransport(kc);
  const admin = createKube(adminTransport, { fieldManager: "kubefn-bench" });
  await installCrdsAndRbac(admin);
  const cluster = kc.getCurrentCluster();
  const caPem = cluster?.caData
    ? Buffer.from(cluster.caData, "base64").toString("utf8")
    : readFileSync(String(cluster?.caFile), "utf8");
  const adminToken = String(kc.getCurrentUser()?.token ?? "");
  return { admin, adminTransport, server: dc.info.server, caPem, adminToken, stop: () => dc.stop() };
}

async function inClusterSubject(c: SoakCluster): Promise<Subject> {
  const volume = serviceAccountVolume(c.caPem);
  const mint = () => serviceAccountToken(c.adminTransport, "kubefn-system", "kubefn", TOKEN_SECONDS);
  volume.publish(await mint());
  volume.link();
  let written = 1;
  // The kubelet's part: a fresh token at 80 % of the last one's life.
  const timer = setInterval(() => {
    void mint().then(
      (t) => {
        volume.publish(t);
        written++;
      },
      (err: unknown) => process.stderr.write(`soak: in-cluster token not minted: ${String(err)}\n`),
    );
  }, KUBELET_ROTATE_SECONDS * 1000);
  const host = await startHost({ ...podEnv(c.server, volume.dir), ...HOST_ENV });
  return {
    name: "in-cluster",
    host,
    renewals: () => written - 1,
    renewalCost: "0 requests (a file read when the kubelet writes the token)",
    async stop() {
      clearInterval(timer);
      await host.stop();
    },
  };
}

async function execPluginSubject(c: SoakCluster): Promise<Subject> {
  const plugin = execPluginKubeconfig(tempDir("kubefn-soak-exec-").path, {
    server: c.server,
    caPem: c.caPem,
    adminToken: c.adminToken,
    label: "soak",
    lifetimeSeconds: EXEC_CLAIM_SECONDS,
  });
  const host = await startHost({ KUBECONFIG: plugin.kubeconfig, ...HOST_ENV });
  const pluginRuns = plugin.runs;
  return {
    name: "exec-plugin",
    host,
    renewals: () => Math.max(0, pluginRuns() - 1),
    renewalCost:
      "0 requests of kubefn's (the plugin's own: here a TokenRequest; `aws eks get-token` presigns locally)",
    stop: () => host.stop().then(() => undefined),
  };
}

/** The API server's count of refused authentications (every request sent with a dead token). */
async function refusedAuthentications(c: SoakCluster): Promise<number> {
  const res = await c.adminTransport.request({ method: "GET", path: "/metrics" });
  let n = 0;
  for (const line of res.body.split("\n")) {
    if (line.startsWith("authentication_attempts{") && /result="(failure|error)"/.test(line))
      n += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return n;
}

const isPass = (l: LogLine) => l.msg === "pass";
const failedPass = (l: LogLine) => isPass(l) && l.result === "error";
const unauthorized = (l: LogLine) => /Unauthorized|\b401\b/.test(JSON.stringify(l));

async function soakOne(
  make: (c: SoakCluster) => Promise<Subject>,
  minutes: number,
  proxies: number,
): Promise<SoakResult> {
  const c = await soakCluster();
  const target = await startHttpTarget();
  const forward = await startForwardProxy();
  let subject: Subject | undefined;
  try {
    subject = await make(c);
    const ns = `soak-${subject.name}`;
    await c.admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns },
    });
    const proxy = (i: number, interval: number): KubeObject => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: `soak-${i}` },
      spec: {
        mode: "External",
        endpoint: { host: "127.0.0.1", port: forward.port, scheme: "http" },
        healthCheck: {
          probeURL: `http://127.0.0.1:${target.port}/`,
          intervalSeconds: interval,
          successThreshold: 1,
        },
      },
    });
    for (let i = 0; i < proxies; i++) await c.admin.create(proxyResource, proxy(i, INTERVAL_SECONDS));
    type P = KubeObject & { status?: { phase?: string; observedGeneration?: number } };
    const settled = async () => {
      const items = (await c.admin.list<P>(proxyResource, { namespace: ns })).items;
      return items.length === proxies &&
        items.every(
          (p) => p.status?.phase === "Ready" && p.status.observedGeneration === p.metadata.generation,
        )
        ? true
        : undefined;
    };
    await eventually(`${subject.name}: ${proxies} Proxies Ready`, settled, 300_000);
    const refusedBefore = await refusedAuthentications(c);
    const from = subject.host.lines.length;
    const started = Date.now();
    process.stderr.write(`soak: ${subject.name} running for ${minutes} minutes …\n`);
    // One spec change a minute: a pass that reads and writes with whatever token is current.
    for (let k = 0; Date.now() - started < minutes * 60_000; k++) {
      await new Promise((r) => setTimeout(r, CHANGE_EVERY_MS));
      const i = k % proxies;
      const interval = INTERVAL_SECONDS + (Math.floor(k / proxies) % 2 === 0 ? 1 : 0);
      await c.admin.patch(
        proxyResource,
        { namespace: ns, name: `soak-${i}` },
        { type: "merge", body: { spec: { healthCheck: { intervalSeconds: interval } } } },
      );
    }
    const ran = Date.now() - started;
    const converged = await eventually(`${subject.name}: every change applied`, settled, 180_000).then(
      () => true,
      () => false,
    );
    const lines = subject.host.lines.slice(from);
    const result: SoakResult = {
      subject: subject.name,
      minutes: Math.round(ran / 6000) / 10,
      expiries: Math.floor(ran / (TOKEN_SECONDS * 1000)),
      renewals: subject.renewals(),
      passes: lines.filter(isPass).length,
      failedPasses: lines.filter(failedPass).length,
      authFailedPasses: lines.filter((l) => failedPass(l) && unauthorized(l)).length,
      refusedRequests: (await refusedAuthentications(c)) - refusedBefore,
      unauthorizedLines: lines.filter(unauthorized).length,
      converged,
      renewalCost: subject.renewalCost,
    };
    await c.admin.delete(Resources.Namespace, { name: ns });
    await eventually(
      `${ns} gone`,
      async () =>
        await c.admin.get(Resources.Namespace, { name: ns }).then(
          () => undefined,
          () => true,
        ),
      120_000,
    ).catch(() => undefined);
    return result;
  } finally {
    await subject?.stop();
    await forward.close();
    await target.close();
    await c.stop();
  }
}

export async function benchSoak(
  minutes = Number(process.env.KUBEFN_BENCH_SOAK_MINUTES ?? 35),
  proxies = Number(process.env.KUBEFN_BENCH_SOAK_PROXIES ?? 10),
): Promise<{ rows: BenchRow[]; json: Record<string, unknown> }> {
  const [node, cloud] = await Promise.all([
    Promise.all([inClusterSubject, execPluginSubject].map((make) => soakOne(make, minutes, proxies))),
    soakCloudTokens(minutes),
  ]);
  const results = [...node, ...cloud];
  const rows = node.map(
    (r): BenchRow => ({
      name: `soak ${r.subject}`,
      figure: r.authFailedPasses,
      unit: "passes failed for authentication",
      note: `${r.minutes} min, ${r.expiries} token expiries, ${r.renewals} renewals (${r.renewalCost}); ${r.passes} passes, ${r.failedPasses} failed; ${r.refusedRequests} requests refused by the API server; ${r.unauthorizedLines} log lines naming a 401; ${r.converged ? "every change applied" : "NOT converged"}; ${proxies} Proxies`,
    }),
  );
  for (const r of cloud)
    rows.push({
      name: `soak ${r.subject}`,
      figure: r.refusedRequests,
      unit: "requests with a dead token (refused)",
      note: `${r.minutes} min, ${r.expiries} token expiries; ${r.passes} requests, ${r.authFailedPasses} failed; renewal costs ${r.renewalCost}`,
    });
  return { rows, json: { bench: "soak", minutes, proxies, results } };
}

/**
 * The serverless platforms' cluster credentials across expiries: Lambda → EKS as its role (EKS
 * tokens, 15 minutes), Lambda and a Worker → GKE with a Google service account's access tokens
 * (10 minutes here; Google's last an hour), each through the Kube the platform builds
 * (functions/aws/cluster.ts, functions/cloudflare/kube-transport.ts), against a devcluster that
 * authenticates them through the token-review webhook (test/support/token-webhook.ts: the SigV4
 * signature recomputed with the secret moto issued, Google tokens asked of the GCE-shaped
 * server). Each asks the API server who it is every 30 s. Printed: requests refused by the
 * webhook (a dead token sent: the goal is 0), requests that failed, token renewals seen.
 *
 * Caveats: the platforms' Kube, not their whole runtime (the Worker's and Lambda's passes are the
 * same code over it; the Node host's rows run the host itself).
 */
export async function soakCloudTokens(minutes: number): Promise<SoakResult[]> {
  const { startMoto, REGION } = await import("../support/moto.ts");
  const { assumeRoleAtMoto, startTokenWebhook } = await import("../support/token-webhook.ts");
  const { startGceServer } = await import("../e2e/gce-server.ts");
  const { clusterKube } = await import("../../functions/aws/cluster.ts");
  const { parseAwsEnv } = await import("../../functions/aws/config.ts");
  const { parseWorkerEnv } = await import("../../functions/cloudflare/config.ts");
  const { workerTransport } = await import("../../functions/cloudflare/kube-transport.ts");
  const username = "system:serviceaccount:kubefn-system:kubefn";
  const role = "arn:aws:iam::123456789012:role/kubefn-lambda";
  const account = "kubefn@kubefn-gke.iam.gserviceaccount.com";
  const dir = tempDir("kubefn-soak-cloud-").path;
  const moto = await startMoto();
  const gce = await startGceServer("kubefn-gke", "127.0.0.1", { tokenLifetimeSeconds: TOKEN_SECONDS });
  const closers: Array<() => Promise<unknown>> = [() => gce.close(), () => moto.close()];
  try {
    const creds = await assumeRoleAtMoto(moto.endpoint, role);
    const webhook = await startTokenWebhook({
      dir,
      eks: {
        clusterName: "kubefn-soak",
        stsEndpoint: moto.endpoint,
        credentials: new Map([[creds.accessKeyId, creds]]),
        roles: new Map([[role, { username }]]),
      },
      google: { tokeninfoUrl: `${gce.url}/tokeninfo`, accounts: new Map([[account, { username }]]) },
    });
    closers.unshift(() => webhook.close());
    const dc = await startDevcluster({
      apiserverArgs: [
        `--authentication-token-webhook-config-file=${webhook.kubeconfig}`,
        "--authentication-token-webhook-version=v1",
        "--authentication-token-webhook-cache-ttl=1s",
      ],
    });
    closers.unshift(() => dc.stop());
    const kc = loadKubeConfig({ file: dc.info.kubeconfig });
    const cluster = kc.getCurrentCluster();
    const caData =
      cluster?.caData ?? Buffer.from(readFileSync(String(cluster?.caFile), "utf8")).toString("base64");
    const common = {
      AWS_REGION: REGION,
      QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
      KUBE_SERVER: dc.info.server,
      KUBE_CA_DATA: caData,
    };
    const lambdaKube = (env: Record<string, string>) =>
      clusterKube(parseAwsEnv(env), { env, clock: { now: () => new Date() } }).kube;
    const subjects: Array<[string, Kube, "eks" | "google"]> = [
      [
        "lambda-eks",
        lambdaKube({
          ...common,
          EKS_CLUSTER_NAME: "kubefn-soak",
          AWS_ACCESS_KEY_ID: creds.accessKeyId,
          AWS_SECRET_ACCESS_KEY: creds.secretAccessKey,
          AWS_SESSION_TOKEN: creds.sessionToken,
        }),
        "eks",
      ],
      ["lambda-gke", lambdaKube({ ...common, KUBE_GOOGLE_CREDENTIALS: gce.credentials }), "google"],
      [
        "worker-gke",
        createKube(
          workerTransport(
            parseWorkerEnv({ KUBE_SERVER: dc.info.httpProxy, KUBE_GOOGLE_CREDENTIALS: gce.credentials }),
          ),
        ),
        "google",
      ],
    ];
    const review: Resource = {
      group: "authentication.k8s.io",
      version: "v1",
      resource: "selfsubjectreviews",
      kind: "SelfSubjectReview",
      namespaced: false,
    };
    const stats = subjects.map(() => ({ requests: 0, failed: 0, wrongUser: 0 }));
    const started = Date.now();
    process.stderr.write(`soak: cloud tokens running for ${minutes} minutes …\n`);
    const before = webhook.reviews.length;
    while (Date.now() - started < minutes * 60_000) {
      for (const [i, [, kube]] of subjects.entries()) {
        const s = stats[i]!;
        s.requests++;
        try {
          const r = await kube.create<KubeObject & { status?: { userInfo?: { username?: string } } }>(
            review,
            {
              apiVersion: "authentication.k8s.io/v1",
              kind: "SelfSubjectReview",
              metadata: {},
            },
          );
          if (r.status?.userInfo?.username !== username) s.wrongUser++;
        } catch {
          s.failed++;
        }
      }
      await new Promise((r) => setTimeout(r, 30_000));
    }
    const ran = Date.now() - started;
    const reviews = webhook.reviews.slice(before);
    return subjects.map(([name, , form], i): SoakResult => {
      const mine = reviews.filter((r) => r.form === form);
      const refused = mine.filter((r) => !r.authenticated).length;
      return {
        subject: name,
        minutes: Math.round(ran / 6000) / 10,
        expiries: Math.floor(ran / ((form === "eks" ? 900 : TOKEN_SECONDS) * 1000)),
        renewals: Number.NaN,
        passes: stats[i]!.requests,
        failedPasses: stats[i]!.failed + stats[i]!.wrongUser,
        authFailedPasses: stats[i]!.failed,
        refusedRequests: refused,
        unauthorizedLines: refused,
        converged: stats[i]!.failed === 0,
        renewalCost:
          form === "eks"
            ? "0 requests: a presigned URL signed locally"
            : "1 token request to Google, none to the API server",
      };
    });
  } finally {
    for (const close of closers) await close().catch(() => undefined);
  }
}
