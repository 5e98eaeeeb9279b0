/**
 * Issue 30, the High: "a message body stands in for the object". Whoever can write into one of
 * kubefn's channels — the holder of the audit token or the relay secret, a principal allowed
 * `PutLogEvents` on an EKS audit log group, `pubsub.topics.publish` on the Log Router topic,
 * `sqs:SendMessage` on the queue — sends a body the API server never stored: a SubPool with the
 * attacker's image, a Proxy with the attacker's address. Each channel here gets one, through the
 * path a platform takes (kubefn's seam in process: `fetch` for the audit webhook, the relay and
 * Pub/Sub push, `ingest` for a CloudWatch Logs delivery, `consume` for a queue batch as Workers
 * and Lambda hand it over), against the real API server as kubefn's least-privileged
 * ServiceAccount. No write carries the forged values: the SubPool's StatefulSet keeps the admin's
 * image, the Proxy's sealed `status.ip` stays the admin's endpoint, and a forged job reaches no
 * handler.
 *
 * The cost is counted on the wire: an event-triggered pass reads its primary (one GET) now that
 * no body stands in for it.
 *
 * Caveats: the relay never attached a body to a message; its test guards that it stays so.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import {
  asServiceAccount,
  installCrdsAndRbac,
  optInNamespace,
  serviceAccountToken,
} from "../../functions/node/install.ts";
import { createKubefn, type Kubefn } from "../../shared/app/kubefn.ts";
import { encodeCloudWatchLogs, logEntryFromAuditEvent, pushBodyOf } from "../../shared/audit-export/index.ts";
import { signBatch } from "../../shared/auth/relay-signature.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyController } from "../../shared/controllers/proxy/controller.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { subPoolController } from "../../shared/controllers/subpool/controller.ts";
import {
  type CountingTransport,
  countingTransport,
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { createStatusSeal } from "../../shared/runtime/core/index.ts";
import { createRegistry, type Message } from "../../shared/runtime/index.ts";
import { createTokenSigner, type TokenSigner } from "../fixtures/google-tokens.ts";

const suffix = Math.random().toString(36).slice(2, 6);
const auditToken = `audit-${suffix}-token-0123456789`;
const relaySecret = `relay-${suffix}-secret-0123456789`;
const sealKey = `seal-${suffix}-key-0123456789abcdef`;
const AUDIENCE = "https://kubefn.example.com/v1/events/pubsub";
const PUSH_SA = "kubefn-push@kubefn-demo.iam.gserviceaccount.com";
const ns = `forged-${suffix}`;
const pool = `forged-${suffix}`;
const proxyName = "tenant-proxy";
const ADMIN_IMAGE = "ghcr.io/subrelay/cpa:1.4.0";
const ATTACKER_IMAGE = "attacker.example/cpa:evil";
const ADMIN_HOST = "203.0.113.7";
const ATTACKER_HOST = "198.51.100.66";
/** Audit IDs handed out, so that no channel's events repeat another's. */
let auditIds = 0;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let admin: Kube;
let wire: CountingTransport;
let kubefn: Kubefn;
let signer: TokenSigner;
let queued: Message[] = [];
const counted: Array<{ name: string; labels: Record<string, string> }> = [];
const errors: string[] = [];
/** What the spy job handler was handed. */
const jobObjects: KubeObject[] = [];
/** Every write kubefn sent whose body carried a forged value, even one a later pass undid. */
const forgedWrites: string[] = [];

type ProxyObject = KubeObject & { status?: { ip?: string; seal?: string } };

function poolSpec(image: string): Record<string, unknown> {
  return {
    exposure: { mode: "Internal" },
    storage: { size: "1Gi" },
    cpa: { image, resources: { requests: { cpu: "100m", memory: "64Mi" } } },
    cpaManager: {
      image: "ghcr.io/subrelay/cpa-manager:1.4.0",
      resources: { requests: { cpu: "100m", memory: "64Mi" } },
    },
  };
}

/** The SubPool as stored, with the attacker's image in its spec: a body the API server never stored. */
async function forgedPool(): Promise<KubeObject> {
  const stored = await admin.get(subPoolResource, { name: pool });
  return { ...stored, spec: poolSpec(ATTACKER_IMAGE) };
}

/** The Proxy as stored, pointing at the attacker's address. */
async function forgedProxy(): Promise<KubeObject> {
  const stored = await admin.get(proxyResource, { namespace: ns, name: proxyName });
  const spec = stored.spec as Record<string, unknown>;
  return { ...stored, spec: { ...spec, endpoint: { host: ATTACKER_HOST, port: 3128, scheme: "http" } } };
}

/**
 * An audit event of a spec patch that stored `object`, as an API server at RequestResponse level
 * would send it (a spec patch passes every controller's predicate).
 */
function updateEvent(object: KubeObject, resource: string, i: number): Record<string, unknown> {
  auditIds++;
  const at = new Date().toISOString();
  const group = resource === "subpools" ? subPoolResource.group : proxyResource.group;
  return {
    kind: "Event",
    apiVersion: "audit.k8s.io/v1",
    level: "RequestResponse",
    auditID: `00000000-0000-4000-8000-${suffix}${String(auditIds).padStart(4, "0")}${String(i).padStart(4, "0")}`,
    stage: "ResponseComplete",
    requestURI: `/apis/${group}/v1alpha1/${resource}/${object.metadata.name}`,
    verb: "patch",
    user: { username: "admin", groups: ["system:masters", "system:authenticated"] },
    objectRef: {
      resource,
      name: object.metadata.name,
      ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
      apiGroup: group,
      apiVersion: "v1alpha1",
    },
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: at,
    stageTimestamp: at,
    requestObject: { spec: object.spec },
    responseObject: object,
  };
}

async function forgedEvents(): Promise<Record<string, unknown>[]> {
  return [updateEvent(await forgedPool(), "subpools", 1), updateEvent(await forgedProxy(), "proxies", 2)];
}

const post = (path: string, body: string, headers: Record<string, string>) =>
  kubefn.fetch(
    new Request(`http://kubefn.test${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    }),
  );

/** Consumes what intake enqueued (and whatever the passes send at once) until nothing is left. */
async function drain(): Promise<void> {
  for (let round = 0; round < 5 && queued.length > 0; round++) {
    const batch = queued;
    queued = [];
    await kubefn.consume(batch.map((body) => ({ body })));
  }
}

async function cpaImage(): Promise<string | undefined> {
  const sts = await admin.get<
    KubeObject & { spec?: { template?: { spec?: { containers?: { image?: string }[] } } } }
  >(Resources.StatefulSet, { namespace: subPoolNamespaceName(pool), name: `${pool}-cpa-manager` });
  return sts.spec?.template?.spec?.containers?.find((c) => (c as { name?: string }).name === "cpa")?.image;
}

/** Neither the StatefulSet nor the Proxy's status carries what the forged bodies said. */
async function expectNoForgedWrite(): Promise<void> {
  expect(forgedWrites).toEqual([]);
  expect(errors).toEqual([]);
  expect(await cpaImage()).toBe(ADMIN_IMAGE);
  const proxy = await admin.get<ProxyObject>(proxyResource, { namespace: ns, name: proxyName });
  expect(proxy.status?.ip).toBe(ADMIN_HOST);
  expect(await createStatusSeal(sealKey).verify(proxy)).toBe("sealed");
}

beforeAll(async () => {
  const adminKc = loadKubeConfig({ file: inject("kubeconfig") });
  admin = createKube(createNodeTransport(adminKc));
  await installCrdsAndRbac(admin);
  signer = await createTokenSigner();
  const token = await serviceAccountToken(createNodeTransport(adminKc), "kubefn-system", "kubefn");
  const kubefns = createNodeTransport(asServiceAccount(adminKc, token));
  wire = countingTransport({
    request: (req) => {
      if (req.method !== "GET" && (req.body?.includes(ATTACKER_IMAGE) || req.body?.includes(ATTACKER_HOST)))
        forgedWrites.push(`${req.method} ${req.path}`);
      return kubefns.request(req);
    },
  });
  const settings = parseWorkerEnv({
    KUBE_SERVER: "https://kube.invalid",
    KUBE_TOKEN: "unused",
    AUDIT_TOKEN: auditToken,
    RELAY_SECRET: relaySecret,
    STATUS_SEAL_KEY: sealKey,
    PUBSUB_AUDIENCE: AUDIENCE,
    PUBSUB_SERVICE_ACCOUNT: PUSH_SA,
    PUBSUB_JWKS: JSON.stringify(signer.jwks),
  });
  kubefn = createKubefn(
    settings,
    {
      kube: createKube(wire, { fieldManager: "kubefn" }),
      queue: { send: async (messages) => void queued.push(...messages) },
      prober: { probe: async () => ({ ok: true }) } as never,
      log: {
        info: () => {},
        warn: () => {},
        // A Conflict is a pass's ordinary "requeue now" (two passes of one key in one batch).
        error: (msg, fields) => {
          if (fields?.class !== "conflict") errors.push(`${msg} ${JSON.stringify(fields)}`);
        },
      },
      metrics: {
        count: (name, labels = {}) => void counted.push({ name, labels }),
        observe: () => {},
        gauge: () => {},
      },
    },
    {
      registry: createRegistry([
        subPoolController(),
        proxyController({
          providers: () => ({}),
          jobs: {
            probe: async (_ctx, objects) => {
              jobObjects.push(...objects);
              return { probed: objects.length };
            },
          },
        }),
      ]),
      sweepTasks: [],
    },
  );

  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await optInNamespace(admin, ns);
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.create(subPoolResource, {
        apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
        kind: "SubPool",
        metadata: { name: pool },
        spec: poolSpec(ADMIN_IMAGE),
      });
      break;
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
  await admin.create(proxyResource, {
    apiVersion: `${proxyResource.group}/${proxyResource.version}`,
    kind: "Proxy",
    metadata: { name: proxyName, namespace: ns },
    spec: { mode: "External", endpoint: { host: ADMIN_HOST, port: 3128, scheme: "http" } },
  });
  await converge();
  await expectNoForgedWrite();
}, 120_000);

/** kubefn's own passes, from keys alone: the pool's objects and the Proxy's sealed status. */
async function converge(): Promise<void> {
  queued = [
    { request: { controller: "subpool", name: pool }, attempt: 0 },
    { request: { controller: "proxy", namespace: ns, name: proxyName }, attempt: 0 },
  ];
  await drain();
  errors.length = 0;
  forgedWrites.length = 0;
}

// Each attack starts from kubefn's own state (an attack that got through is undone first).
beforeEach(converge);

/**
 * Runs `send` (a forged delivery), then every pass it enqueued; no write may carry the forged
 * values. Returns the messages intake enqueued.
 */
async function attack(send: () => Promise<void>): Promise<Message[]> {
  queued = [];
  await send();
  const enqueued = [...queued];
  await drain();
  await expectNoForgedWrite();
  return enqueued;
}

afterAll(async () => {
  await admin.delete(proxyResource, { namespace: ns, name: proxyName }).catch(() => undefined);
  await admin.delete(subPoolResource, { name: pool }).catch(() => undefined);
  // Drive the SubPool's finalizer (its Namespace goes first), as its own events would.
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const left = await admin.get(subPoolResource, { name: pool }).catch(() => undefined);
    if (!left) break;
    await kubefn.consume([{ body: { request: { controller: "subpool", name: pool }, attempt: 0 } }]);
    await sleep(1000);
  }
  await admin.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
}, 120_000);

describe("a forged body on each intake channel decides no write", () => {
  it("the audit webhook: a SubPool with the attacker's image and a Proxy with the attacker's address", async () => {
    const items = await forgedEvents();
    wire.reset();
    counted.length = 0;
    const enqueued = await attack(async () => {
      const res = await post(
        "/v1/events",
        JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", metadata: {}, items }),
        { authorization: `Bearer ${auditToken}` },
      );
      expect(res.status, await res.clone().text()).toBe(202);
    });
    // The messages carry keys, never the bodies.
    expect(enqueued.map((m) => (m.kind === "job" ? m.job.slot : m.request.name)).sort()).toEqual(
      [pool, proxyName].sort(),
    );
    for (const m of enqueued)
      expect(Object.keys(m).filter((k) => k === "snapshot" || k === "listed")).toEqual([]);

    // The cost: each pass (the two the events brought, and their follow-ups) reads its primary.
    const passes = counted.filter((c) => c.name === "kubefn_passes_total").length;
    const primaryReads = wire
      .calls()
      .filter(
        (c) =>
          c.method === "GET" &&
          (c.path.endsWith(`/subpools/${pool}`) || c.path.endsWith(`/namespaces/${ns}/proxies/${proxyName}`)),
      ).length;
    console.log(
      `security-forged-bodies: ${passes} passes (2 event-triggered, their follow-ups) read their primary ${primaryReads} times (${wire.calls().filter((c) => c.method === "GET").length} GETs in all)`,
    );
    expect(primaryReads).toBe(passes);
  });

  it("the relay: a signed batch with the same bodies", async () => {
    const [poolBody, proxyBody] = [await forgedPool(), await forgedProxy()];
    const body = JSON.stringify({
      kind: "RelayBatch",
      apiVersion: "kubefn.dev/v1",
      events: [
        {
          type: "MODIFIED",
          resource: { group: subPoolResource.group, version: "v1alpha1", resource: "subpools" },
          object: poolBody,
        },
        {
          type: "MODIFIED",
          resource: { group: proxyResource.group, version: "v1alpha1", resource: "proxies" },
          object: proxyBody,
        },
      ],
    });
    const enqueued = await attack(async () => {
      const res = await post("/v1/events", body, await signBatch(relaySecret, body, Date.now() / 1000));
      expect(res.status, await res.clone().text()).toBe(202);
    });
    expect(enqueued.length).toBe(2);
  });

  it("GKE Pub/Sub push: one LogEntry per forged event, bodies included", async () => {
    const events = await forgedEvents();
    const enqueued = await attack(async () => {
      for (const [i, event] of events.entries()) {
        const entry = logEntryFromAuditEvent(event, { cluster: "prod", project: "kubefn-demo" });
        const res = await post(
          "/v1/events/pubsub",
          JSON.stringify(
            pushBodyOf(entry, `${suffix}-${i}`, "projects/kubefn-demo/subscriptions/kubefn-audit"),
          ),
          { authorization: `Bearer ${await signer.sign({ aud: AUDIENCE, email: PUSH_SA })}` },
        );
        expect(res.status, await res.clone().text()).toBeLessThan(300);
      }
    });
    expect(enqueued.length).toBe(2);
  });

  it("EKS CloudWatch Logs: one subscription delivery of the forged events", async () => {
    const data = await encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      owner: "111122223333",
      logGroup: "/aws/eks/prod/cluster",
      logStream: "kube-apiserver-audit-00112233445566778899aabbccddeeff",
      subscriptionFilters: ["kubefn-audit"],
      logEvents: (await forgedEvents()).map((e, i) => ({
        id: String(39_000_000_000_000n + BigInt(i)),
        timestamp: Date.now(),
        message: JSON.stringify(e),
      })),
    });
    const enqueued = await attack(async () => {
      const result = await kubefn.ingest({ source: "cloudwatch-logs", data });
      expect("acknowledged" in result ? 0 : result.enqueued).toBe(2);
    });
    expect(enqueued.length).toBe(2);
  });
});

describe("a forged queue message decides no write (as Workers and Lambda deliver a batch)", () => {
  it("a pass whose snapshot and listed objects are the attacker's, fresh and without a MAC", async () => {
    const now = Date.now();
    const poolBody = await forgedPool();
    const sts = await admin.get(Resources.StatefulSet, {
      namespace: subPoolNamespaceName(pool),
      name: `${pool}-cpa-manager`,
    });
    const forgedSts = structuredClone(sts);
    const { containers } = (forgedSts.spec as { template: { spec: { containers: { image: string }[] } } })
      .template.spec;
    for (const c of containers) c.image = ATTACKER_IMAGE;
    const proxyBody = await forgedProxy();
    await attack(async () => {
      const verdicts = await kubefn.consume([
        {
          body: {
            v: 1,
            request: { controller: "subpool", name: pool },
            attempt: 0,
            trigger: { kind: "drift", reason: "generation" },
            uid: poolBody.metadata.uid,
            snapshot: poolBody,
            listed: [forgedSts],
            listedAt: now,
          },
        },
        {
          body: {
            v: 1,
            request: { controller: "proxy", namespace: ns, name: proxyName },
            attempt: 0,
            trigger: { kind: "drift", reason: "generation" },
            snapshot: proxyBody,
            listedAt: now,
          },
        },
      ]);
      expect(verdicts.every((v) => v.ack)).toBe(true);
    });
  });

  it("a job (probe shard) whose objects are the attacker's is refused, counted, and reaches no handler", async () => {
    const proxy = await forgedProxy();
    (proxy as ProxyObject).status = { ip: ATTACKER_HOST };
    counted.length = 0;
    const verdicts = await kubefn.consume([
      {
        body: {
          kind: "job",
          v: 2,
          job: { controller: "proxy", task: "probe", slot: "0", objects: [proxy], due: Date.now() },
        },
      },
    ]);
    expect(verdicts).toEqual([{ ack: true, dropped: true }]);
    expect(jobObjects).toEqual([]);
    expect(counted).toContainEqual({
      name: "kubefn_messages_dropped_total",
      labels: { reason: "unauthenticated" },
    });
  });
});
