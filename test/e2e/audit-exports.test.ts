/**
 * Done-when for the managed clusters' audit-log exports: real audit events from the devcluster
 * for a set of writes, transformed into each provider's delivery shape, reach the same reconcile
 * requests as the audit webhook's `EventList` of the same events:
 *
 * - EKS: one CloudWatch Logs subscription delivery (`awslogs.data`, gzip + base64, one log event
 *   per audit event) into the Lambda handler, in process, mapping against the real API server;
 * - GKE: one Pub/Sub push per audit event (a Cloud Logging LogEntry; custom resources at Metadata
 *   level, without bodies, as GKE logs them), with an OIDC token signed by a key generated here and
 *   served as a JWKS on loopback, into the Node host (child process, keys fetched from the URL) and
 *   the Worker (workerd via wrangler, keys given inline).
 *
 * Bad deliveries get the answer the provider acts on (401/403 redeliver, 200 acknowledges what no
 * retry can fix) and enqueue nothing.
 */
import { readFileSync } from "node:fs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { parse } from "yaml";
import { createHandler } from "../../functions/aws/handler.ts";
import { installCrdsAndRbac, optInNamespace, serviceAccountToken } from "../../functions/node/install.ts";
import { encodeCloudWatchLogs, logEntryFromAuditEvent, pushBodyOf } from "../../shared/audit-export/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import {
  createFetchTransport,
  createKube,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import type { Request } from "../../shared/runtime/index.ts";
import { matchesFilterPattern } from "../fixtures/cloudwatch-filter.ts";
import {
  createTokenSigner,
  type JwksServer,
  startJwksServer,
  type TokenSigner,
} from "../fixtures/google-tokens.ts";
import { type AuditEvent, auditEventsSince, clusterInfo, eventually } from "../setup/cluster.ts";
import { createKubefnAws, type KubefnAws, type Moto, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

const root = new URL("../../", import.meta.url).pathname;
const ns = `exports-${Math.random().toString(36).slice(2, 8)}`;
/** The namespace a SubPool named `ns` derives. */
const poolNamespace = `subpool-${ns}`;
const AUDIT_TOKEN = crypto.randomUUID();
const AUDIENCE = "https://kubefn.example.com/v1/events/pubsub";
const PUSH_SA = "kubefn-push@kubefn-demo.iam.gserviceaccount.com";
const SUBSCRIPTION = "projects/kubefn-demo/subscriptions/kubefn-audit";

let admin: Kube;
let saToken: string;
let signer: TokenSigner;
let jwks: JwksServer;
let host: HostProcess;
let harness: TestHarness;
let moto: Moto;
let aws: KubefnAws;
/** The audit events of the writes below, as the API server's webhook delivered them. */
let events: AuditEvent[];
/** What the audit webhook's EventList of `events` maps to (the Node host's answer). */
let webhookRequests: Request[];

const proxy = (name: string, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { name, namespace: ns },
  spec: {
    mode: "External",
    endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" },
    cloudInit: { secretRef: { name: "ci" } },
    ...extra,
  },
});

/** The writes: each is something a provider's audit log records. */
/** The ResponseComplete events of {@link writeThings} (controllers' writes are system:…). */
const WRITES = [
  "create proxies 201",
  "create secrets 201",
  "patch proxies 200",
  "patch proxies/status 200",
  "create proxies 409",
  "delete proxies 200",
  "create namespaces 201",
  "create configmaps 201",
  "create pods 201",
];

/** An audit event as `<verb> <resource>[/<subresource>] <code>`. */
function signature(e: AuditEvent): string {
  const sub = e.objectRef?.subresource ? `/${e.objectRef.subresource}` : "";
  return `${e.verb} ${e.objectRef?.resource}${sub} ${e.responseStatus?.code}`;
}

async function writeThings(): Promise<void> {
  const a = await admin.create<KubeObject>(proxyResource, proxy("px-a"));
  await admin.create(Resources.Secret, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace: ns, name: "ci" },
    stringData: { "user-data": "#cloud-config\n" },
  } as KubeObject);
  await admin.patch(
    proxyResource,
    { namespace: ns, name: "px-a" },
    {
      type: "merge",
      body: { spec: { endpoint: { host: "203.0.113.7", port: 3129, scheme: "http" } } },
    },
  );
  await admin.patchStatus(
    proxyResource,
    { namespace: ns, name: "px-a" },
    {
      type: "merge",
      body: { status: { phase: "Pending" } },
    },
  );
  await admin.create(proxyResource, proxy("px-a")).then(
    () => {
      throw new Error("the second create should fail");
    },
    () => undefined,
  );
  await admin.create(proxyResource, proxy("px-b"));
  await admin.delete(proxyResource, { namespace: ns, name: "px-b" });
  // A SubPool's namespace and an object it derives in it (its ConfigMap `<pool>-config`): owned
  // kinds, mapped to the SubPool from their key (the audit policy logs them at Metadata level,
  // without a body).
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: poolNamespace },
  } as KubeObject);
  await admin.create(Resources.ConfigMap, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { namespace: poolNamespace, name: `${ns}-config` },
    data: { k: "v" },
  } as KubeObject);
  // A Pod the proxy controller does not own: maps to nothing anywhere.
  await admin.create(Resources.Pod, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: ns,
      name: "owned-pod",
      ownerReferences: [
        {
          apiVersion: "crawl.kubefn.dev/v1alpha1",
          kind: "Proxy",
          name: "px-a",
          uid: a.metadata.uid!,
          controller: true,
        },
      ],
    },
    spec: { containers: [{ name: "c", image: "busybox" }] },
  } as KubeObject);
}

const isCustom = (e: AuditEvent) =>
  (e.objectRef?.apiGroup ?? "").includes(".") && !e.objectRef?.apiGroup?.endsWith("k8s.io");

const keyOf = (r: Request) => `${r.controller}/${r.namespace ?? ""}/${r.name}`;
const keys = (rs: Request[]) => [...new Set(rs.map(keyOf))].sort();

async function pushBody(e: AuditEvent, i: number): Promise<string> {
  const entry = logEntryFromAuditEvent(e as unknown as Record<string, unknown>, {
    cluster: "prod",
    project: "kubefn-demo",
    metadataOnly: isCustom(e),
  });
  return JSON.stringify(pushBodyOf(entry, String(1000 + i), SUBSCRIPTION));
}

const token = (claims: Record<string, unknown> = {}) =>
  signer.sign({ aud: AUDIENCE, email: PUSH_SA, ...claims });

type Poster = (
  path: string,
  body: string,
  headers: Record<string, string>,
) => Promise<{ status: number; json(): Promise<unknown> }>;
const hostPost: Poster = (path, body, headers) =>
  fetch(`${host.url}${path}`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
const workerPost: Poster = (path, body, headers) =>
  harness.fetch(path, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

/** Every audit event as its own Pub/Sub push; the requests of all 202 answers. */
async function pushAll(post: Poster): Promise<Request[]> {
  const out: Request[] = [];
  for (const [i, e] of events.entries()) {
    const res = await post("/v1/events/pubsub", await pushBody(e, i), {
      authorization: `Bearer ${await token()}`,
    });
    expect(res.status, `push of ${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name}`).toBeLessThan(300);
    const body = (await res.json()) as { requests?: Request[] };
    out.push(...(body.requests ?? []));
  }
  return out;
}

beforeAll(async () => {
  const { httpProxy, adminToken, kubeconfig } = clusterInfo();
  const adminTransport = createFetchTransport({ server: httpProxy, token: adminToken });
  admin = createKube(adminTransport, { fieldManager: "kubefn-e2e" });
  await installCrdsAndRbac(admin);
  saToken = await serviceAccountToken(adminTransport, "kubefn-system", "kubefn");
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await optInNamespace(admin, ns);
  signer = await createTokenSigner();
  jwks = await startJwksServer(signer.jwks);

  const { next } = await auditEventsSince(0);
  await writeThings();
  events = await eventually(
    async () => {
      const found = (await auditEventsSince(next)).events.filter(
        (e) =>
          e.stage === "ResponseComplete" &&
          !(e.user?.username ?? "system:").startsWith("system:") &&
          [e.objectRef?.namespace, e.objectRef?.name].some((n) => n === ns || n === poolNamespace) &&
          e.verb !== "get" &&
          // The namespace's own create, made before `next` was read, may be delivered after it
          // (the webhook batches): it is not one of the writes counted.
          !(e.verb === "create" && e.objectRef?.resource === "namespaces" && e.objectRef.name === ns),
      );
      // Every write's event, whatever else came (an event of a write made before `next` may
      // arrive late: a count would end the wait one short).
      const seen = new Set(found.map(signature));
      return WRITES.every((w) => seen.has(w)) ? found : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 200, what: "the writes' audit events" },
  );

  [host, harness] = await Promise.all([
    functionsKubeconfig(kubeconfig).then((sa) =>
      startHost({
        KUBECONFIG: sa,
        KUBEFN_AUDIT_TOKEN: AUDIT_TOKEN,
        KUBEFN_PUBSUB_AUDIENCE: AUDIENCE,
        KUBEFN_PUBSUB_SERVICE_ACCOUNT: PUSH_SA,
        KUBEFN_PUBSUB_JWKS_URL: jwks.url,
        KUBEFN_SWEEP_SECONDS: "3600",
      }),
    ),
    (async () => {
      const h = createTestHarness({
        root,
        workers: [
          {
            configPath: "wrangler.toml",
            vars: {
              KUBE_SERVER: httpProxy,
              PUBSUB_AUDIENCE: AUDIENCE,
              PUBSUB_SERVICE_ACCOUNT: PUSH_SA,
              PUBSUB_JWKS: JSON.stringify(signer.jwks),
            },
            secrets: { KUBE_TOKEN: saToken, AUDIT_TOKEN },
          },
        ],
      });
      await h.listen();
      return h;
    })(),
  ]);
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);

  const res = await hostPost(
    "/v1/events",
    JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: events }),
    { authorization: `Bearer ${AUDIT_TOKEN}` },
  );
  expect(res.status).toBe(202);
  webhookRequests = ((await res.json()) as { requests: Request[] }).requests;
}, 240_000);

afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await Promise.all([host?.stop(), harness?.close(), jwks?.close(), moto?.close()]);
  for (const name of [ns, poolNamespace])
    await admin?.delete(Resources.Namespace, { name }).catch(() => undefined);
});

describe("the writes and what the audit webhook makes of them", () => {
  it("are the real audit events of every write, and map to the Proxies and the owning SubPool", () => {
    expect(events.map(signature)).toEqual(expect.arrayContaining(WRITES));
    expect(keys(webhookRequests)).toEqual([`proxy/${ns}/px-a`, `proxy/${ns}/px-b`, `subpool//${ns}`].sort());
  });
});

describe("EKS: CloudWatch Logs subscription → the Lambda handler", () => {
  const lambdaContext = {
    functionName: "kubefn",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
    memoryLimitInMB: "512",
    awsRequestId: "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716",
    logGroupName: "/aws/lambda/kubefn",
    logStreamName: "2026/11/30/[$LATEST]00112233445566778899aabbccddeeff",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 60_000,
  } satisfies LambdaContext;

  const handler = () =>
    createHandler({
      env: {
        AWS_REGION: "us-east-1",
        QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
        KUBECONFIG_BASE64: Buffer.from("unused: the kube port is given").toString("base64"),
        AUDIT_TOKEN,
        MAX_BODY_BYTES: String(64 << 20),
      },
      endpoint: moto.endpoint,
      kube: () =>
        createKube(createFetchTransport({ server: clusterInfo().httpProxy, token: saToken }), {
          fieldManager: "kubefn",
        }),
    });

  /** Requests the template's Reconcile rule routed to the function (moto's EventBridge). */
  const sent = async () =>
    (await aws.deliveredMessages()).flatMap((m) => (m.kind === "job" ? [] : [m.request]));

  it("one delivery of the audit log events → the webhook's requests, sent on the bus", async () => {
    // EKS writes each audit event as one JSON log line, with its kind and apiVersion.
    const data = await encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      owner: "111122223333",
      logGroup: "/aws/eks/prod/cluster",
      logStream: "kube-apiserver-audit-00112233445566778899aabbccddeeff",
      subscriptionFilters: ["kubefn-audit"],
      logEvents: events.map((e, i) => ({
        id: String(38_000_000_000_000n + BigInt(i)),
        timestamp: Date.now(),
        message: JSON.stringify({ kind: "Event", apiVersion: "audit.k8s.io/v1", ...e }),
      })),
    });
    const out = (await handler()({ awslogs: { data } }, lambdaContext)) as { requests: Request[] };
    expect(out.requests).toEqual(webhookRequests);
    expect(await sent()).toEqual(webhookRequests);
  });

  it("the template's subscription filter, applied to everything the API server audited, keeps every event that maps", async () => {
    const pattern = (
      parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
        logLevel: "error",
      }) as { Resources: { EksAuditLogSubscription: { Properties: { FilterPattern: string } } } }
    ).Resources.EksAuditLogSubscription.Properties.FilterPattern;
    const all = (await auditEventsSince(0)).events.map((e) => ({
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      ...e,
    }));
    const passed = all.filter((e) => matchesFilterPattern(pattern, e));
    const h = handler();
    const unfiltered = (await h(
      {
        version: "2.0",
        routeKey: "$default",
        rawPath: "/v1/events",
        rawQueryString: "",
        headers: { "content-type": "application/json", authorization: `Bearer ${AUDIT_TOKEN}` },
        requestContext: { http: { method: "POST", path: "/v1/events", sourceIp: "127.0.0.1" } },
        body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: all }),
        isBase64Encoded: false,
      },
      lambdaContext,
    )) as { statusCode: number; body: string };
    expect(unfiltered.statusCode).toBe(202);
    const data = await encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      logGroup: "/aws/eks/prod/cluster",
      logEvents: passed.map((e, i) => ({ id: String(i), timestamp: Date.now(), message: JSON.stringify(e) })),
    });
    const filtered = (await h({ awslogs: { data } }, lambdaContext)) as { requests: Request[] };
    expect(keys(filtered.requests)).toEqual(keys(JSON.parse(unfiltered.body).requests));
    expect(passed.length).toBeLessThan(all.length);
    console.log(
      `EKS filter pattern: ${passed.length} of ${all.length} audit events of this run pass (${(
        (100 * passed.length) / all.length
      ).toFixed(1)}%); both map to ${filtered.requests.length} requests`,
    );
  });

  it("undecodable and control deliveries do no work and do not throw (no retry can help)", async () => {
    await aws.delivered();
    const h = handler();
    expect(await h({ awslogs: { data: Buffer.from("{}").toString("base64") } }, lambdaContext)).toMatchObject(
      {
        acknowledged: "Undecodable",
      },
    );
    const control = await encodeCloudWatchLogs({
      messageType: "CONTROL_MESSAGE",
      logGroup: "",
      logEvents: [],
    });
    expect(await h({ awslogs: { data: control } }, lambdaContext)).toMatchObject({
      acknowledged: "ControlMessage",
    });
    expect(await aws.delivered()).toEqual([]);
  });
});

describe.each([
  ["the Node host (keys fetched from the JWKS URL)", () => hostPost],
  ["the Worker in workerd (keys given inline)", () => workerPost],
])("GKE: Pub/Sub push → %s", (_where, poster) => {
  it("one push per audit event → together, the webhook's requests", async () => {
    expect(keys(await pushAll(poster()))).toEqual(keys(webhookRequests));
  });

  it("bad deliveries: 401/403 when unauthenticated (redelivered), 200 when no retry can help; nothing enqueued", async () => {
    const post = poster();
    const forged = JSON.stringify(
      pushBodyOf(
        logEntryFromAuditEvent(
          {
            ...(events[0] as unknown as Record<string, unknown>),
            objectRef: { ...events[0]!.objectRef, name: "px-forged" },
          },
          { cluster: "prod", project: "kubefn-demo", metadataOnly: true },
        ),
        "9",
        SUBSCRIPTION,
      ),
    );
    const other = await createTokenSigner(signer.kid);
    const cases: Array<[Record<string, string>, string, number]> = [
      [{}, forged, 401],
      [{ authorization: `Bearer ${AUDIT_TOKEN}` }, forged, 401],
      [{ authorization: `Bearer ${await token({ aud: "https://elsewhere.example.com" })}` }, forged, 403],
      [
        { authorization: `Bearer ${await token({ email: "attacker@evil.iam.gserviceaccount.com" })}` },
        forged,
        403,
      ],
      [{ authorization: `Bearer ${await other.sign({ aud: AUDIENCE, email: PUSH_SA })}` }, forged, 401],
      [
        { authorization: `Bearer ${await token()}` },
        JSON.stringify({ message: { messageId: "1", data: "%%%" } }),
        200,
      ],
      [{ authorization: `Bearer ${await token()}` }, "not json", 200],
    ];
    for (const [headers, body, status] of cases) {
      const res = await post("/v1/events/pubsub", body, headers);
      expect(res.status).toBe(status);
      const answer = (await res.json()) as { enqueued?: number };
      expect(answer.enqueued ?? 0).toBe(0);
    }
  });
});

describe("nothing the bad deliveries named was reconciled", () => {
  it("no pass for px-forged on the Node host or in the Worker", async () => {
    // The good pushes, sent before the bad ones, have had their passes on both by now.
    const workerPasses = () =>
      harness
        .getLogs()
        .map((l) => l.message)
        .filter((m) => m.includes('"pass"'));
    await eventually(
      async () =>
        host.lines.some((l) => l.msg === "pass" && String(l.key).endsWith("/px-a")) &&
        workerPasses().some((m) => m.includes("/px-a"))
          ? true
          : undefined,
      { timeoutMs: 30_000, what: "a pass for px-a on the host and in the Worker" },
    );
    expect(host.lines.some((l) => String(l.key ?? "").endsWith("/px-forged"))).toBe(false);
    expect(workerPasses().some((m) => m.includes("px-forged"))).toBe(false);
  });
});
