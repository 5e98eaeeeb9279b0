/**
 * `npm run bench -- reaction`: how long a change takes to reach its controller, per intake path,
 * with the settings the docs give, on the production-shaped devcluster (`--profile production`),
 * beside a watch-based controller.
 *
 * For each path a devcluster of its own; `samples` objects applied one at a time with
 * `kubectl apply`, spaced by a random 0–5 s (so they land anywhere in the webhook's batch window),
 * each timed from the apply to the first pass for it triggered by that path (its log line's own
 * time) and, for a Proxy, to phase Ready (polled every 100 ms; Ready needs one successful probe,
 * successThreshold 1, interval 5 s, run by a sweep every 5 s on every kubefn path):
 *
 * - `audit webhook`: the API server's webhook with exactly the documented flags
 *   (`--audit-webhook-mode=batch`, the default 30 s batch wait), pointed at the Node host's intake;
 * - `relay`: no audit webhook; the relay process (infra/relay/main.ts, its defaults: batches of at
 *   most 1 s) watches and posts to the host;
 * - `EKS export`: EKS writes its audit log to CloudWatch Logs, whose subscription filter invokes
 *   the Lambda. CloudWatch cannot run here: the API server's webhook (the same documented flags)
 *   posts to a bridge that keeps the events the template's `FilterPattern` passes and encodes
 *   each batch as the subscription's `awslogs.data` (gzip, base64) for the Lambda handler
 *   (functions/aws/handler.ts, in this process, as infra/aws/template.yaml's reconcile function),
 *   which maps them onto its queue (moto's SQS); a poller hands the queue's batches back to the
 *   handler as the event source mapping does (batches of 10, 1 s long polls), and the sweep rule
 *   is an invocation every 5 s;
 * - `GKE Pub/Sub`: GKE's audit log goes through a Log Router sink to Pub/Sub, which pushes each
 *   entry to `/v1/events/pubsub`. The same bridge turns each event into the LogEntry Cloud Logging
 *   writes (custom resources at Metadata level, as GKE logs them), keeps what
 *   docs/deploying/README.md's sink filter passes, and posts it in Pub/Sub's push body with an
 *   OIDC token as Google signs one (a key made here, its JWKS on loopback) to the Node host;
 * - `watch (controller-runtime)`: no kubefn; the controller-runtime peer of `npm run bench --
 *   fleet` (test/bench/peer), reconciling SubPools of its own group from its informers' watches.
 *   Timed from the apply of a SubPool to the start of its first Reconcile (its log line's `at`).
 *   Its Ready needs a running StatefulSet, which the devcluster (no kubelet) never has: not timed.
 *
 * For the two exports, `delivered` is when the bridge received the webhook's batch holding the
 * create: what follows (the bridge's encoding, the handler, the queue, the pass) is kubefn's share.
 * What precedes it here is the webhook's batch wait, which stands in for the provider's own
 * pipeline (the API server to CloudWatch Logs or Cloud Logging, then the subscription or the
 * sink): not measured here.
 *
 * `KUBEFN_BENCH_REACTION_SAMPLES` (default 4) samples per path; `KUBEFN_BENCH_REACTION_PATHS`
 * (comma-separated of webhook, relay, eks, gke, watch; default all) to run fewer paths.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LambdaContext } from "hono/aws-lambda";
import { parse as parseYaml } from "yaml";
import { createHandler } from "../../functions/aws/handler.ts";
import { type Devcluster, devclusterBinary, startDevcluster } from "../../functions/node/dev/devcluster.ts";
import { asServiceAccount, serviceAccountToken } from "../../functions/node/install.ts";
import { encodeCloudWatchLogs, logEntryFromAuditEvent, pushBodyOf } from "../../shared/audit-export/index.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Log } from "../../shared/runtime/index.ts";
import { functionsKubeconfig, type LogLine, startHost } from "../e2e/host.ts";
import { matchesFilterPattern } from "../fixtures/cloudwatch-filter.ts";
import { createTokenSigner, startJwksServer } from "../fixtures/google-tokens.ts";
import { outputOf } from "../support/child-output.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { createKubefnAws, REGION, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { freePort } from "../support/oidc-issuer.ts";
import { startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";
import { tempDir } from "../support/temp-dir.ts";
import type { BenchRow } from "./cluster.ts";
import { buildPeer, installPeer, PEER_GROUP, PEER_NAMESPACE } from "./fleet.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const samples = Number(process.env.KUBEFN_BENCH_REACTION_SAMPLES ?? "4");

const PATHS = {
  webhook: "audit webhook",
  relay: "relay",
  eks: "EKS export",
  gke: "GKE Pub/Sub",
  watch: "watch (controller-runtime)",
} as const;
type IntakePath = (typeof PATHS)[keyof typeof PATHS];

interface Sample {
  firstPassMs: number;
  /** Apply → Ready; NaN when not Ready within the wait; absent where not timed. */
  readyMs?: number;
  /** Apply → the bridge received the create (the exports only). */
  deliveredMs?: number;
}

/** One path, started: what each sample applies and how its reaction to it is seen. */
interface Reactor {
  kind: "proxy" | "subpool";
  /** When the first pass (or Reconcile) for the object triggered by this path was logged, epoch ms. */
  firstPass(ns: string, name: string): Promise<number>;
  /** When the change reached the bridge, epoch ms (the exports only). */
  delivered?(ns: string, name: string): Promise<number>;
}

/** A path's devcluster's and processes' releases, run last first. */
type Cleanups = Array<() => unknown>;

const WAIT_MS = 120_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The devcluster's own kubectl against `dc`. */
async function kubectl(dc: Devcluster, args: string[], input?: string): Promise<string> {
  const child = spawn(devclusterBinary, ["kubectl", "--kubeconfig", dc.info.kubeconfig, ...args], {
    stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  const r = await outputOf(child, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

function proxyYaml(ns: string, name: string, proxyPort: number, targetPort: number): string {
  return `apiVersion: crawl.kubefn.dev/v1alpha1
kind: Proxy
metadata: { name: ${name}, namespace: ${ns} }
spec:
  mode: External
  endpoint: { host: 127.0.0.1, port: ${proxyPort}, scheme: http }
  healthCheck: { probeURL: "http://127.0.0.1:${targetPort}/", intervalSeconds: 5, successThreshold: 1 }
`;
}

/** A SubPool of the peer's group, as `npm run bench -- fleet` makes them. */
function peerSubPoolYaml(name: string): string {
  return `apiVersion: ${PEER_GROUP}/v1alpha1
kind: SubPool
metadata: { name: ${name} }
spec:
  exposure: { mode: Internal }
  storage: { size: 1Gi }
  cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: 100m, memory: 64Mi } } }
  cpaManager: { image: "ghcr.io/subrelay/cpa-manager:1.4.0", resources: { requests: { cpu: 50m, memory: 32Mi } } }
`;
}

/** Log lines as they are written, with the time each was written; waits for one. */
function lineLog(): {
  log: Log;
  waitFor(pred: (l: LogLine) => boolean, timeoutMs: number): Promise<LogLine>;
} {
  const lines: LogLine[] = [];
  const write =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      lines.push({ ...fields, time: new Date().toISOString(), level, msg });
      if (level === "error") process.stderr.write(`  lambda: ${msg} ${JSON.stringify(fields)}\n`);
    };
  return {
    log: { info: write("info"), warn: write("warn"), error: write("error") },
    async waitFor(pred, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const seen = lines.find(pred);
        if (seen) return seen;
        if (Date.now() > deadline) throw new Error(`log line not seen in ${timeoutMs} ms`);
        await sleep(20);
      }
    },
  };
}

interface AuditEvent {
  stage?: string;
  verb?: string;
  objectRef?: { resource?: string; namespace?: string; name?: string; apiGroup?: string };
  [field: string]: unknown;
}

/**
 * The API server's audit webhook received where a provider's log pipeline would take the log:
 * each EventList answered at once and handed to `forward` (deliveries overlap, as the providers'
 * do). Records when each create reached it.
 */
async function startAuditBridge(
  port: number,
  token: string,
  forward: (events: AuditEvent[]) => Promise<void>,
): Promise<{ arrival(key: string): Promise<number>; close(): Promise<void> }> {
  const arrivals = new Map<string, number>();
  const pending = new Set<Promise<void>>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end();
      const at = Date.now();
      const items =
        (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { items?: AuditEvent[] }).items ?? [];
      for (const e of items) {
        const ref = e.objectRef;
        if (e.stage === "ResponseComplete" && e.verb === "create" && ref?.name) {
          const key = `${ref.resource}/${ref.namespace ?? ""}/${ref.name}`;
          if (!arrivals.has(key)) arrivals.set(key, at);
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      const p = forward(items).catch((err: unknown) => {
        process.stderr.write(`  bridge: a delivery failed: ${String(err)}\n`);
      });
      pending.add(p);
      void p.then(() => pending.delete(p));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    async arrival(key) {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const at = arrivals.get(key);
        if (at !== undefined) return at;
        if (Date.now() > deadline) throw new Error(`the create of ${key} did not reach the bridge`);
        await sleep(20);
      }
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all(pending);
    },
  };
}

/** The template's subscription filter pattern (infra/aws/template.yaml, EksAuditLogSubscription). */
function eksFilterPattern(): string {
  const template = parseYaml(readFileSync(join(root, "infra/aws/template.yaml"), "utf8"), {
    logLevel: "error",
  }) as { Resources: { EksAuditLogSubscription: { Properties: { FilterPattern: string } } } };
  return template.Resources.EksAuditLogSubscription.Properties.FilterPattern;
}

/** The method regex of the sink filter docs/deploying/README.md gives for GKE. */
function gkeSinkMethodRegex(): RegExp {
  const page = readFileSync(join(root, "docs/deploying/README.md"), "utf8");
  const filter = page.split("\n").find((l) => l.startsWith("logName=") && l.includes("methodName=~"));
  const m = filter ? /methodName=~"(.*)"$/.exec(filter) : null;
  if (!m?.[1]) throw new Error("docs/deploying/README.md has no GKE sink filter");
  return new RegExp(m[1]);
}

const isCustomResource = (e: AuditEvent) =>
  (e.objectRef?.apiGroup ?? "").includes(".") && !e.objectRef?.apiGroup?.endsWith("k8s.io");

const lambdaContext = {
  functionName: "kubefn-reconcile",
  functionVersion: "$LATEST",
  invokedFunctionArn: `arn:aws:lambda:${REGION}:123456789012:function:kubefn-reconcile`,
  memoryLimitInMB: "512",
  awsRequestId: "00000000-0000-4000-8000-000000000000",
  logGroupName: "/aws/lambda/kubefn-reconcile",
  logStreamName: "2026/12/04/[$LATEST]00000000000000000000000000000000",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;

/** The EKS path: bridge → CloudWatch Logs delivery → the Lambda handler → moto's SQS → the handler. */
async function startEks(dc: Devcluster, bridgePort: number, auditToken: string, cleanups: Cleanups) {
  // moto accepts any credentials; the SDK's default chain reads them from the environment.
  const saved = Object.fromEntries(Object.keys(TEST_CREDENTIALS).map((k) => [k, process.env[k]]));
  Object.assign(process.env, TEST_CREDENTIALS);
  cleanups.push(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  const moto = await startMoto();
  cleanups.push(() => moto.close());
  const aws = await createKubefnAws(moto.endpoint);
  cleanups.push(() => aws.close());
  const kubeconfig = readFileSync(await functionsKubeconfig(dc.info.kubeconfig));
  const { log, waitFor } = lineLog();
  const handler = createHandler({
    env: {
      AWS_REGION: REGION,
      QUEUE_URL: aws.queueUrl,
      KUBECONFIG_BASE64: kubeconfig.toString("base64"),
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
    },
    role: "reconcile",
    endpoint: moto.endpoint,
    log,
    metrics: { count() {}, observe() {}, gauge() {} },
  });
  const invoke = (event: unknown) => handler(event, lambdaContext);
  let running = true;
  const poller = (async () => {
    while (running) {
      try {
        await aws.poll((event) => invoke(event), 1);
      } catch (err) {
        if (running) process.stderr.write(`  EKS export: a queue batch failed: ${String(err)}\n`);
        await sleep(500);
      }
    }
  })();
  const scheduled = JSON.parse(readFileSync(join(root, "test/fixtures/aws/scheduled-event.json"), "utf8"));
  const sweeping = setInterval(() => {
    invoke({ ...scheduled, time: new Date().toISOString() }).catch((err: unknown) =>
      process.stderr.write(`  EKS export: a sweep failed: ${String(err)}\n`),
    );
  }, 5000);
  cleanups.push(async () => {
    running = false;
    clearInterval(sweeping);
    await poller;
  });
  const pattern = eksFilterPattern();
  let id = 0n;
  const bridge = await startAuditBridge(bridgePort, auditToken, async (items) => {
    // EKS writes each audit event as one JSON log line, with its kind and apiVersion.
    const events = items
      .map((e) => ({ kind: "Event", apiVersion: "audit.k8s.io/v1", ...e }))
      .filter((e) => matchesFilterPattern(pattern, e));
    if (events.length === 0) return;
    const data = await encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      owner: "123456789012",
      logGroup: "/aws/eks/reaction/cluster",
      logStream: "kube-apiserver-audit-00000000000000000000000000000000",
      subscriptionFilters: ["kubefn-audit"],
      logEvents: events.map((e) => ({
        id: String(38_000_000_000_000n + id++),
        timestamp: Date.now(),
        message: JSON.stringify(e),
      })),
    });
    await invoke({ awslogs: { data } });
  });
  cleanups.push(() => bridge.close());
  return { bridge, waitFor };
}

const PUSH_AUDIENCE = "https://kubefn.example.com/v1/events/pubsub";
const PUSH_SA = "kubefn-push@kubefn-bench.iam.gserviceaccount.com";

async function measure(path: IntakePath): Promise<Sample[]> {
  const auditToken = randomBytes(24).toString("hex");
  const relaySecret = randomBytes(24).toString("hex");
  const hostPort = await freePort();
  const bridgePort = await freePort();
  const webhookTo =
    path === PATHS.webhook
      ? `http://127.0.0.1:${hostPort}/v1/events`
      : path === PATHS.eks || path === PATHS.gke
        ? `http://127.0.0.1:${bridgePort}/v1/events`
        : undefined;
  console.error(`  ${path}: starting a production-profile devcluster`);
  const dc = await startDevcluster({
    profile: "production",
    ...(webhookTo ? { auditWebhookUrl: webhookTo, auditWebhookToken: auditToken } : {}),
  });
  const cleanups: Cleanups = [() => dc.stop()];
  // Children killed if the bench exits without its cleanups (run.ts exits at once on a signal).
  const children: ChildProcess[] = [];
  const killChildren = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  };
  process.once("exit", killChildren);
  cleanups.push(() => process.off("exit", killChildren));
  try {
    const [proxy, target] = await Promise.all([startForwardProxy({ record: false }), startHttpTarget()]);
    cleanups.push(() => Promise.all([proxy.close(), target.close()]));
    const reactor = await startPath(
      path,
      dc,
      { hostPort, bridgePort, auditToken, relaySecret },
      cleanups,
      children,
    );
    console.error(`  ${path}: up, applying ${samples} ${reactor.kind === "proxy" ? "Proxies" : "SubPools"}`);
    const ns = `reaction-${randomBytes(3).toString("hex")}`;
    if (reactor.kind === "proxy") await kubectl(dc, ["create", "namespace", ns]);
    const out: Sample[] = [];
    for (let i = 0; i < samples; i++) {
      await sleep(Math.random() * 5000);
      const name = reactor.kind === "proxy" ? `p${i}` : `pool-${i}`;
      const applied = Date.now();
      await kubectl(
        dc,
        ["apply", "-f", "-"],
        reactor.kind === "proxy" ? proxyYaml(ns, name, proxy.port, target.port) : peerSubPoolYaml(name),
      );
      // Ready is polled from the apply on, beside the wait for the path's pass: whichever (the
      // path's pass or the sweep's) gets there first.
      const ready = reactor.kind === "proxy" ? readyAfter(dc, ns, name, applied) : undefined;
      const [passAt, deliveredAt] = await Promise.all([
        reactor.firstPass(ns, name),
        reactor.delivered?.(ns, name),
      ]);
      const sample: Sample = {
        firstPassMs: passAt - applied,
        ...(ready ? { readyMs: await ready } : {}),
        ...(deliveredAt !== undefined ? { deliveredMs: deliveredAt - applied } : {}),
      };
      out.push(sample);
      console.error(
        `  ${path}: ${name}${sample.deliveredMs !== undefined ? ` delivered ${sample.deliveredMs} ms,` : ""} first ${reactor.kind === "proxy" ? "pass" : "Reconcile"} ${sample.firstPassMs} ms${sample.readyMs !== undefined ? `, Ready ${sample.readyMs} ms` : ""}`,
      );
    }
    return out;
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

/** Apply → phase Ready of a Proxy, polled every 100 ms; NaN when not Ready within the wait. */
async function readyAfter(dc: Devcluster, ns: string, name: string, applied: number): Promise<number> {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    const phase = await kubectl(dc, ["get", "proxy", name, "-n", ns, "-o", "jsonpath={.status.phase}"]).catch(
      () => "",
    );
    if (phase === "Ready") return Date.now() - applied;
    await sleep(100);
  }
  process.stderr.write(`  proxy ${ns}/${name} not Ready within ${WAIT_MS / 1000} s\n`);
  return Number.NaN;
}

async function startPath(
  path: IntakePath,
  dc: Devcluster,
  ports: { hostPort: number; bridgePort: number; auditToken: string; relaySecret: string },
  cleanups: Cleanups,
  children: ChildProcess[],
): Promise<Reactor> {
  const passKey = (ns: string, name: string) => `proxy/${ns}/${name}`;
  const bridgeKey = (ns: string, name: string) => `proxies/${ns}/${name}`;
  switch (path) {
    case PATHS.eks: {
      const { bridge, waitFor } = await startEks(dc, ports.bridgePort, ports.auditToken, cleanups);
      return {
        kind: "proxy",
        firstPass: async (ns, name) =>
          Date.parse(
            (
              await waitFor(
                (l) => l.msg === "pass" && l.key === passKey(ns, name) && l.trigger === "audit",
                WAIT_MS,
              )
            ).time,
          ),
        delivered: (ns, name) => bridge.arrival(bridgeKey(ns, name)),
      };
    }
    case PATHS.watch:
      return startPeer(dc, cleanups, children);
    case PATHS.webhook:
    case PATHS.relay:
    case PATHS.gke:
      break;
  }
  // The Node host as the ServiceAccount. Probes run from the sweep: a short period, so Ready
  // follows within seconds (the sweep may also reconcile a new Proxy before its event arrives:
  // the path's pass is timed apart).
  const gke =
    path === PATHS.gke
      ? await (async () => {
          const signer = await createTokenSigner();
          const jwks = await startJwksServer(signer.jwks);
          cleanups.push(() => jwks.close());
          return { signer, jwks };
        })()
      : undefined;
  const host = await startHost({
    KUBECONFIG: await functionsKubeconfig(dc.info.kubeconfig),
    KUBEFN_PORT: String(ports.hostPort),
    SWEEP_PERIOD_SECONDS: "5",
    ...(path === PATHS.webhook ? { KUBEFN_AUDIT_TOKEN: ports.auditToken } : {}),
    ...(path === PATHS.relay ? { KUBEFN_RELAY_SECRET: ports.relaySecret } : {}),
    ...(gke
      ? {
          KUBEFN_PUBSUB_AUDIENCE: PUSH_AUDIENCE,
          KUBEFN_PUBSUB_SERVICE_ACCOUNT: PUSH_SA,
          KUBEFN_PUBSUB_JWKS_URL: gke.jwks.url,
        }
      : {}),
  });
  children.push(host.child);
  cleanups.push(() => host.stop());
  let delivered: Reactor["delivered"];
  if (path === PATHS.relay) {
    const relay = spawn(process.execPath, ["--import", "tsx", "infra/relay/main.ts"], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
      env: {
        ...process.env,
        KUBECONFIG: dc.info.kubeconfig,
        KUBEFN_INTAKE_URL: `${host.url}/v1/events`,
        KUBEFN_RELAY_SECRET: ports.relaySecret,
        KUBEFN_RELAY_PORT: String(await freePort()),
      },
    });
    children.push(relay);
    const exited = new Promise((resolve) => relay.once("exit", resolve));
    cleanups.push(async () => {
      if (relay.exitCode === null && relay.signalCode === null) relay.kill("SIGTERM");
      await exited;
    });
    await new Promise<void>((resolve, reject) => {
      let out = "";
      relay.stdout?.setEncoding("utf8").on("data", (c: string) => {
        out += c;
        if (out.includes('"msg":"relay started"')) resolve();
      });
      relay.once("exit", (code) => reject(new Error(`relay exited (${code})`)));
    });
    // Its first lists, before anything is applied.
    await sleep(3000);
  }
  if (gke) {
    const methods = gkeSinkMethodRegex();
    let messageId = 1_000_000;
    const bridge = await startAuditBridge(ports.bridgePort, ports.auditToken, async (items) => {
      // Cloud Logging records completed requests; the sink passes what its filter matches; Pub/Sub
      // pushes each message on its own request.
      const entries = items
        .filter((e) => e.stage === "ResponseComplete")
        .map((e) =>
          logEntryFromAuditEvent(e, {
            cluster: "reaction",
            project: "kubefn-bench",
            metadataOnly: isCustomResource(e),
          }),
        )
        .filter((entry) => methods.test(String((entry.protoPayload as { methodName: string }).methodName)));
      await Promise.all(
        entries.map(async (entry) => {
          const res = await fetch(`${host.url}/v1/events/pubsub`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              authorization: `Bearer ${await gke.signer.sign({ aud: PUSH_AUDIENCE, email: PUSH_SA })}`,
            },
            body: JSON.stringify(
              pushBodyOf(entry, String(messageId++), "projects/kubefn-bench/subscriptions/kubefn-audit"),
            ),
          });
          await res.arrayBuffer();
          if (res.status >= 300) throw new Error(`push answered ${res.status}`);
        }),
      );
    });
    cleanups.push(() => bridge.close());
    delivered = (ns, name) => bridge.arrival(bridgeKey(ns, name));
  }
  const trigger = path === PATHS.relay ? "relay" : "audit";
  return {
    kind: "proxy",
    firstPass: async (ns, name) =>
      Date.parse(
        (
          await host.waitFor(
            (l) => l.msg === "pass" && l.key === passKey(ns, name) && l.trigger === trigger,
            WAIT_MS,
          )
        ).time,
      ),
    ...(delivered ? { delivered } : {}),
  };
}

/** The controller-runtime peer (test/bench/peer) as its own ServiceAccount, workers started. */
async function startPeer(dc: Devcluster, cleanups: Cleanups, children: ChildProcess[]): Promise<Reactor> {
  const binary = buildPeer();
  const adminConfig = loadKubeConfig({ file: dc.info.kubeconfig });
  const transport = createNodeTransport(adminConfig);
  await installPeer(createKube(transport, { fieldManager: "kubefn-bench" }));
  const temp = tempDir("kubefn-bench-reaction-");
  cleanups.push(() => temp.remove());
  const kubeconfig = join(temp.path, "peer.kubeconfig");
  writeFileSync(
    kubeconfig,
    asServiceAccount(
      adminConfig,
      await serviceAccountToken(transport, PEER_NAMESPACE, "peer"),
    ).exportConfig(),
    { mode: 0o600 },
  );
  const peer = spawn(binary, [], {
    env: { ...process.env, KUBECONFIG: kubeconfig, PEER_LEASE_NAMESPACE: PEER_NAMESPACE },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.push(peer);
  const exited = new Promise((resolve) => peer.once("exit", resolve));
  cleanups.push(async () => {
    if (peer.exitCode === null && peer.signalCode === null) peer.kill("SIGTERM");
    await exited;
  });
  // zap's JSON lines on stderr; `reconcile` lines carry the request's name and their `at`.
  const firstReconcile = new Map<string, number>();
  let started = false;
  let buffer = "";
  let tail = "";
  peer.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    tail = (tail + chunk).slice(-4000);
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      const raw = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (raw.includes("Starting workers")) started = true;
      if (!raw.includes('"msg":"reconcile"')) continue;
      const line = JSON.parse(raw) as { name?: string; at?: string };
      if (line.name && line.at && !firstReconcile.has(line.name))
        firstReconcile.set(line.name, Date.parse(line.at));
    }
  });
  const until = async <T>(what: string, get: () => T | undefined): Promise<T> => {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const v = get();
      if (v !== undefined) return v;
      if (peer.exitCode !== null || Date.now() > deadline) throw new Error(`the peer: no ${what}:\n${tail}`);
      await sleep(20);
    }
  };
  // Elected, its informers synced and its workers started: from here on it only reacts.
  await until("workers", () => (started ? true : undefined));
  await sleep(2000);
  return {
    kind: "subpool",
    firstPass: (_ns, name) => until(`Reconcile of ${name}`, () => firstReconcile.get(name)),
  };
}

function pathsFromEnv(): IntakePath[] {
  const named = process.env.KUBEFN_BENCH_REACTION_PATHS;
  if (!named) return Object.values(PATHS);
  return named.split(",").map((n) => {
    const path = PATHS[n.trim() as keyof typeof PATHS];
    if (!path)
      throw new Error(`KUBEFN_BENCH_REACTION_PATHS: no path ${n} (${Object.keys(PATHS).join(", ")})`);
    return path;
  });
}

export async function benchReaction(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const path of pathsFromEnv()) {
    const got = await measure(path);
    // Whole seconds and above in s, the bridges' handoffs in ms.
    const note = (xs: number[]) => {
      const ms = xs.every((x) => Number.isNaN(x) || x < 1000);
      const shown = xs.map((x) => (Number.isNaN(x) ? "not Ready" : ms ? String(x) : (x / 1000).toFixed(1)));
      return `median of ${xs.length}; ${shown.join(", ")} ${ms ? "ms" : "s"}`;
    };
    const row = (what: string, xs: number[]): BenchRow => ({
      name: `reaction ${path}: ${what}`,
      figure: Math.round(median(xs.filter((x) => !Number.isNaN(x)))),
      unit: "ms",
      note: note(xs),
    });
    const first = got.map((s) => s.firstPassMs);
    rows.push(row(path === PATHS.watch ? "apply → first Reconcile" : "apply → first pass", first));
    const delivered = got.flatMap((s) => (s.deliveredMs === undefined ? [] : [s.deliveredMs]));
    if (delivered.length > 0) {
      rows.push(row("apply → delivered to kubefn (stand-in webhook)", delivered));
      rows.push(
        row(
          "delivered → first pass (kubefn's share)",
          got.map((s) => s.firstPassMs - (s.deliveredMs ?? Number.NaN)),
        ),
      );
    }
    const ready = got.flatMap((s) => (s.readyMs === undefined ? [] : [s.readyMs]));
    if (ready.length > 0) rows.push(row("apply → Ready", ready));
  }
  return rows;
}
