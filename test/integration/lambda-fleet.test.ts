/**
 * One Lambda stack, three clusters (issue 35): the Lambda handler (`createHandler`, every role)
 * with `KUBEFN_CLUSTERS` declaring three devclusters of this file's own — east and north by a bare
 * token with their server and CA, west by a kubeconfig file — each with its own audit token and
 * relay secret. The reconcile queue is moto's SQS, polled as Lambda's event source mapping does;
 * the sweep is a Scheduled Event every 2 s, as EventBridge sends one a minute.
 *
 * - a Proxy, a SubPool and a Site in each cluster reach Ready, each cluster's passes named on
 *   their log lines, every message on the one queue naming its cluster;
 * - intake knows a batch's cluster by its credential: a relay batch signed with east's secret,
 *   naming west's Proxy, is refused; so is east's audit token asking for west;
 * - east's API server stopped and west's credential revoked (its ServiceAccount deleted): north
 *   keeps converging new objects; west's refusals are on its own lines.
 */
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createHandler } from "../../functions/aws/handler.ts";
import { signBatch } from "../../shared/app/intake/index.ts";
import { Resources } from "../../shared/kube/index.ts";
import { eventually } from "../e2e/host.ts";
import { allReady, type FleetCluster, fleetObjects, startFleetClusters } from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../support/moto.ts";
import type { OwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const names = ["east", "west", "north"] as const;
type Name = (typeof names)[number];

const clusters = {} as Record<Name, FleetCluster>;
const devclusters: OwnDevcluster[] = [];
const secrets = Object.fromEntries(
  names.map((n) => [n, { auditToken: crypto.randomUUID(), relaySecret: crypto.randomUUID() }]),
) as Record<Name, { auditToken: string; relaySecret: string }>;
const lines: Array<{ level: string; msg: string; cluster?: unknown; error?: unknown }> = [];
let moto: Moto | undefined;
let aws: KubefnAws | undefined;
let handler: ReturnType<typeof createHandler>;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
let platform: { stop(): Promise<void> } | undefined;
/** The cluster each message on the queue named, as the poller received them. */
const queued: unknown[] = [];

const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: `arn:aws:lambda:${REGION}:111122223333:function:kubefn`,
  memoryLimitInMB: "512",
  awsRequestId: "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "2026/12/04/[$LATEST]00112233445566778899aabbccddeeff",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;

const objects = (suffix: string) =>
  fleetObjects(suffix, { forwardProxyPort: forwardProxy!.port, targetPort: target!.port });

/**
 * What AWS runs beside the function: the sweep rule's Scheduled Event every 2 s, and the event
 * source mapping's polls of the reconcile queue (one batch at a time).
 */
function runPlatform(): { stop(): Promise<void> } {
  let running = true;
  // A failed invocation is Lambda's to retry; here it is said, and the loop goes on.
  const said = (err: unknown) =>
    void lines.push({ level: "error", msg: `invocation failed: ${String(err)}` });
  const sweeps = (async () => {
    while (running) {
      const time = new Date().toISOString();
      await handler(
        { source: "aws.events", "detail-type": "Scheduled Event", time, detail: {} },
        lambdaContext,
      );
      await new Promise((r) => setTimeout(r, 2000));
    }
  })();
  const polls = (async () => {
    while (running) {
      await aws
        ?.poll(async (event) => {
          for (const r of event.Records) queued.push((JSON.parse(r.body) as { cluster?: unknown }).cluster);
          return handler(event, lambdaContext);
        }, 1)
        .catch(said);
    }
  })();
  return {
    async stop() {
      running = false;
      await Promise.all([sweeps, polls]);
    },
  };
}

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  [forwardProxy, target, moto] = await Promise.all([startForwardProxy(), startHttpTarget(), startMoto()]);
  aws = await createKubefnAws(moto.endpoint);
  const started = await startFleetClusters(names, ({ devcluster }) => devclusters.push(devcluster));
  for (const c of started) clusters[c.name as Name] = c;
  const declared = started.map((c) => ({
    name: c.name,
    ...(c.name === "west"
      ? { credential: { kind: "kubeconfig", file: c.kubeconfig } }
      : { server: c.server, ca: c.ca, credential: { kind: "token", token: c.token } }),
    ...secrets[c.name as Name],
  }));
  const record = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({
      level,
      msg,
      ...(fields && "cluster" in fields ? { cluster: fields.cluster } : {}),
      ...(fields && "error" in fields ? { error: fields.error } : {}),
    });
  handler = createHandler({
    env: {
      AWS_REGION: REGION,
      ...aws.env,
      KUBEFN_CLUSTERS: JSON.stringify(declared),
      STATUS_SEAL_KEY: crypto.randomUUID(),
      // Drift lists at every sweep (resync 60), so one sweep finds a new object.
      PROXY_RESYNC_SECONDS: "60",
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
      CIRCUIT_FAILURES: "2",
      KUBE_TIMEOUT_SECONDS: "5",
    },
    endpoint: moto.endpoint,
    log: { info: record("info"), warn: record("warn"), error: record("error") },
    metrics: { count() {}, observe() {}, gauge() {} },
  });
  platform = runPlatform();
}, 300_000);

afterAll(async () => {
  await platform?.stop();
  await Promise.all(devclusters.map((d) => d.close()));
  aws?.close();
  await Promise.all([forwardProxy?.close(), target?.close(), moto?.close()]);
  vi.unstubAllEnvs();
}, 120_000);

/** An HTTP event of the Function URL posting `body` with `headers` to `/v1/events?cluster=asked`. */
async function post(asked: Name, body: string, headers: Record<string, string>): Promise<number> {
  const res = (await handler(
    {
      version: "2.0",
      routeKey: "$default",
      rawPath: "/v1/events",
      rawQueryString: `cluster=${asked}`,
      queryStringParameters: { cluster: asked },
      headers: { "content-type": "application/json", ...headers },
      requestContext: { http: { method: "POST", path: "/v1/events", sourceIp: "127.0.0.1" } },
      body,
      isBase64Encoded: false,
    },
    lambdaContext,
  )) as { statusCode: number };
  return res.statusCode;
}

/** A relay batch announcing Proxy default/`name`, signed with `secret`, to `?cluster=asked`. */
async function relayBatch(secret: string, asked: Name, name: string): Promise<number> {
  const body = JSON.stringify({
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: [
      {
        type: "ADDED",
        resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" },
        object: { metadata: { namespace: "default", name, uid: crypto.randomUUID(), generation: 1 } },
      },
    ],
  });
  return post(asked, body, await signBatch(secret, body, Date.now() / 1000));
}

describe("one Lambda stack, three clusters", () => {
  it("a Proxy, a SubPool and a Site in each cluster reach Ready", async () => {
    for (const name of names) {
      for (const [res, o] of objects("")) await clusters[name].admin.create(res, o);
    }
    await Promise.all(names.map((name) => allReady(clusters[name], objects(""))));
    for (const name of names) {
      expect(lines.some((l) => l.msg === "pass" && l.cluster === name)).toBe(true);
    }
    // One queue for the fleet: every message on it names its cluster.
    expect(new Set(queued)).toEqual(new Set(names));
  }, 300_000);

  it("intake knows a batch's cluster by its credential: east's secret or token cannot deliver west's events", async () => {
    expect(await relayBatch(secrets.east.relaySecret, "west", "edge")).toBe(401);
    const emptyAudit = JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] });
    expect(await post("west", emptyAudit, { authorization: `Bearer ${secrets.east.auditToken}` })).toBe(401);
    // Each cluster's own credential delivers its own events.
    expect(await relayBatch(secrets.west.relaySecret, "west", "edge")).toBe(202);
    expect(await post("east", emptyAudit, { authorization: `Bearer ${secrets.east.auditToken}` })).toBe(202);
  }, 60_000);

  it("east's API server stopped and west's credential revoked: north keeps converging", async () => {
    await clusters.east.devcluster.close();
    // West's kubefn ServiceAccount deleted: its bound token is refused from now on.
    await clusters.west.admin.delete(Resources.ServiceAccount, {
      namespace: "kubefn-system",
      name: "kubefn",
    });
    const revokedFrom = lines.length;
    for (const [res, o] of objects("-2")) await clusters.north.admin.create(res, o);
    await allReady(clusters.north, objects("-2"));
    await eventually(
      "east's sweep held back by its circuit",
      async () =>
        lines.some((l) => l.cluster === "east" && /sweep held back/.test(l.msg)) ? true : undefined,
      60_000,
    );
    // West's requests are refused (401), said on west's lines; north's passes went on meanwhile.
    await eventually(
      "west's refused credential on its lines",
      async () =>
        lines
          .slice(revokedFrom)
          .some((l) => l.cluster === "west" && /\b401\b|Unauthorized/.test(JSON.stringify(l)))
          ? true
          : undefined,
      60_000,
    );
    expect(lines.slice(revokedFrom).some((l) => l.msg === "pass" && l.cluster === "north")).toBe(true);
  }, 300_000);
});
