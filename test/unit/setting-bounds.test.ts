/**
 * Every setting with a documented range, at each of its bounds, on every platform: the Node
 * host's app, the Worker (its env parsing and seam, in process; test/e2e/worker.test.ts starts
 * workerd at the extremes) and the Lambda handler (an SQS batch through `createHandler`, against
 * moto's SQS). The table is generated from the settings schema (shared/app/setting-ranges.ts), so
 * a new ranged setting is covered without being listed here. At each bound every operator must
 * start (all three controllers registered) and serve (a pass of each writes its Ready, none of
 * them "stopped"), and the host answers `/healthz`.
 *
 * Regression: SUBPOOL_RECHECK_SECONDS from 60 up (documented 5–3600) made the registry refuse the
 * SubPool definition, so every platform failed to start and all three operators were down.
 */
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { lambdaEnvSchema } from "../../functions/aws/config.ts";
import { createHandler } from "../../functions/aws/handler.ts";
import { parseWorkerEnv, workerEnvSchema } from "../../functions/cloudflare/config.ts";
import { nodeHostEnvSchema, parseNodeHostEnv } from "../../functions/node/config.ts";
import { hostApp } from "../../functions/node/server.ts";
import {
  createKubefn,
  type KubefnSettings,
  PrometheusMetrics,
  settingsVariables,
} from "../../shared/app/index.ts";
import { settingRanges } from "../../shared/app/setting-ranges.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import type { KubeObject, Resource } from "../../shared/kube/index.ts";
import { ENVELOPE_VERSION, type Message } from "../../shared/runtime/index.ts";
import { FakeKube } from "../support/fake-kube.ts";
import { createKubefnAws, type KubefnAws, type Moto, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { testProxy } from "../support/proxies.ts";
import { subPoolObject } from "../support/subpools.ts";

const ranges = settingRanges(settingsVariables);
/** Each platform's own schema: the shared settings and its own variables (ports, token renewal). */
const platformRanges = {
  node: settingRanges(nodeHostEnvSchema.def.shape),
  worker: settingRanges(workerEnvSchema.def.shape),
  lambda: settingRanges(lambdaEnvSchema.def.shape),
};
/** A setting without an upper bound is also started far above its lower one. */
const FAR = 1_000_000;
/** Reasons a stopped operator writes on its primaries' Ready. */
const stopped = ["InvalidOperatorConfig", "OperatorNotStarted"];

type Platform = "node" | "worker" | "lambda";
const platforms: Platform[] = ["node", "worker", "lambda"];
/** Refusals a platform documents beyond the schema's range (docs/settings.md). */
const platformFloors: Record<Platform, Record<string, number>> = {
  node: {},
  worker: { SWEEP_PERIOD_SECONDS: 60 },
  lambda: { SWEEP_PERIOD_SECONDS: 60 },
};

const cases = platforms.flatMap((platform) =>
  Object.entries(platformRanges[platform]).flatMap(([name, range]) => {
    const floor = platformFloors[platform][name];
    const values = [floor ?? range.min, range.max ?? (range.integer ? FAR : FAR + 0.5)];
    return values.map((value) => ({ platform, name, value }));
  }),
);

const NOW = new Date("2026-12-03T12:00:00Z");
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };
const lambdaContext = {
  awsRequestId: "r",
  getRemainingTimeInMillis: () => 60_000,
} as unknown as LambdaContext;

/** One primary of each operator, as the API server returns them. */
const primaries: { controller: string; resource: Resource; object: KubeObject }[] = [
  {
    controller: "proxy",
    resource: proxyResource,
    object: testProxy({ name: "p1", endpoint: { host: "203.0.113.10", port: 8080, scheme: "http" } }),
  },
  { controller: "subpool", resource: subPoolResource, object: subPoolObject() },
  {
    controller: "site",
    resource: siteResource,
    object: {
      apiVersion: `${siteResource.group}/${siteResource.version}`,
      kind: "Site",
      metadata: { name: "west", uid: "uid-west", generation: 1 },
      spec: {},
    },
  },
];

function seeded(): FakeKube {
  const kube = new FakeKube(() => NOW);
  for (const p of primaries) kube.seed(p.resource, structuredClone(p.object));
  return kube;
}

const passes: Message[] = primaries.map((p) => ({
  v: ENVELOPE_VERSION,
  request: {
    controller: p.controller,
    ...(p.object.metadata.namespace ? { namespace: p.object.metadata.namespace } : {}),
    name: p.object.metadata.name!,
  },
  attempt: 0,
}));

/** Each operator's primary carries a Ready its own pass wrote: reason, and whether it is "stopped". */
function readyReasons(kube: FakeKube): Record<string, string | undefined> {
  return Object.fromEntries(
    primaries.map((p) => {
      const stored = kube.stored(p.resource, {
        ...(p.object.metadata.namespace ? { namespace: p.object.metadata.namespace } : {}),
        name: p.object.metadata.name!,
      });
      const conditions = (stored?.status as { conditions?: { type: string; reason?: string }[] } | undefined)
        ?.conditions;
      return [p.controller, conditions?.find((c) => c.type === "Ready")?.reason];
    }),
  );
}

function portsFor(kube: FakeKube) {
  return {
    kube,
    queue: { send: async () => {} },
    prober: { probe: async () => ({ ok: true, latencyMillis: 1 }) } as never,
    log: silent,
    metrics: noMetrics,
    clock: { now: () => NOW },
    random: () => 0.5,
  };
}

/** The Node host's app (hostApp over createKubefn) with the host's own env parsing. */
async function startNode(env: Record<string, string>, kube: FakeKube) {
  const config = parseNodeHostEnv({ KUBECONFIG: "/nonexistent/kubeconfig", ...env });
  const kubefn = createKubefn(config.settings, portsFor(kube));
  const app = hostApp(new PrometheusMetrics(), () => ({ kubefn }) as never);
  return {
    controllers: kubefn.controllers,
    healthz: (await app.request("/healthz")).status,
    serve: () => kubefn.consume(passes.map((body) => ({ body }))),
  };
}

/** The Worker's seam as worker.ts builds it per isolate: parseWorkerEnv, then createKubefn. */
async function startWorker(env: Record<string, string>, kube: FakeKube) {
  const config: KubefnSettings = parseWorkerEnv({
    KUBE_SERVER: "https://kube.example.com",
    KUBE_TOKEN: "t",
    ...env,
  });
  const kubefn = createKubefn(config, portsFor(kube));
  return {
    controllers: kubefn.controllers,
    healthz: (await kubefn.fetch(new Request("https://kubefn.example/healthz"))).status,
    serve: () => kubefn.consume(passes.map((body) => ({ body }))),
  };
}

let moto: Moto;
let aws: KubefnAws;

/** The deployed Lambda handler (createHandler), fed an SQS batch of the reconcile queue's shape. */
async function startLambda(env: Record<string, string>, kube: FakeKube) {
  const handler = createHandler({
    env: {
      AWS_REGION: "us-east-1",
      KUBECONFIG: "/nonexistent/kubeconfig",
      AUDIT_TOKEN: "test-audit-token-0123456789",
      ...aws.env,
      ...env,
    },
    endpoint: moto.endpoint,
    kube: () => kube,
    clock: { now: () => NOW },
    log: silent,
    metrics: noMetrics,
  });
  const http = (await handler(
    {
      version: "2.0",
      rawPath: "/healthz",
      rawQueryString: "",
      headers: {},
      requestContext: { http: { method: "GET", path: "/healthz" } },
      isBase64Encoded: false,
    },
    lambdaContext,
  )) as { statusCode: number };
  const batch = {
    Records: passes.map((body, i) => ({
      eventSource: "aws:sqs",
      messageId: `m${i}`,
      receiptHandle: `r${i}`,
      body: JSON.stringify(body),
      attributes: { ApproximateReceiveCount: "1" },
    })),
  };
  return {
    controllers: ["proxy", "subpool", "site"],
    healthz: http.statusCode,
    serve: async () => {
      const response = (await handler(batch, lambdaContext)) as { batchItemFailures: unknown[] };
      expect(response.batchItemFailures).toEqual([]);
      return [];
    },
  };
}

const start = { node: startNode, worker: startWorker, lambda: startLambda };

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
}, 30_000);
afterAll(async () => {
  await aws?.delivered();
  vi.unstubAllEnvs();
  aws?.close();
  await moto?.close();
});

describe("the range table is generated from the schema", () => {
  it("holds every numeric setting and the operator settings parsed by hand", () => {
    expect(Object.keys(ranges)).toEqual(
      expect.arrayContaining([
        "SWEEP_PERIOD_SECONDS",
        "PROBE_SHARD_SIZE",
        "KUBE_TIMEOUT_SECONDS",
        "SUBPOOL_RECHECK_SECONDS",
      ]),
    );
    expect(ranges.SUBPOOL_RECHECK_SECONDS).toEqual({ min: 5, max: 3600, integer: true });
    expect(ranges.SWEEP_PERIOD_SECONDS).toEqual({ min: 1, max: 3600, integer: true });
    // Each platform's own ranged variables too, and every shared one on each.
    expect(platformRanges.node.KUBEFN_PORT).toEqual({ min: 0, max: 65535, integer: true });
    expect(platformRanges.lambda.EKS_TOKEN_RENEW_SECONDS).toEqual({ min: 1, max: 840, integer: true });
    for (const platform of platforms) expect(platformRanges[platform]).toMatchObject(ranges);
  });

  it.each([
    [
      "worker",
      () => parseWorkerEnv({ KUBE_SERVER: "https://k.example", KUBE_TOKEN: "t", SWEEP_PERIOD_SECONDS: "59" }),
    ],
  ])("a platform floor is a refusal naming the setting (%s)", (_platform, parse) => {
    expect(parse).toThrow(/SWEEP_PERIOD_SECONDS/);
  });
});

describe.each(cases)("$platform with $name=$value", ({ platform, name, value }) => {
  it("starts every operator, answers /healthz, and each operator serves a pass", async () => {
    const kube = seeded();
    const host = await start[platform]({ [name]: String(value) }, kube);
    expect(host.controllers).toEqual(["proxy", "subpool", "site"]);
    expect(host.healthz).toBe(200);
    const verdicts = await host.serve();
    for (const verdict of verdicts) expect(verdict).toMatchObject({ ack: true });
    const reasons = readyReasons(kube);
    for (const controller of ["proxy", "subpool", "site"]) {
      expect(reasons[controller], `${controller}'s Ready`).toBeDefined();
      expect(stopped, `${controller}'s Ready`).not.toContain(reasons[controller]);
    }
  });
});

describe("no setting can fail another operator's start", () => {
  const base = () => parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" });
  it.each<[string, (s: KubefnSettings) => KubefnSettings, string, string]>([
    [
      "a Proxy resync the registry refuses (over a week) stops Proxies only",
      (s) => ({
        ...s,
        operators: { ...s.operators, proxy: { ...s.operators.proxy, resyncSeconds: 10_000_000 } },
      }),
      "proxy",
      "OperatorNotStarted",
    ],
    [
      "a SubPool recheck the registry refuses (-1 s) stops SubPools only, as a bad SUBPOOL_* value does",
      (s) => ({
        ...s,
        operators: { ...s.operators, subpool: { ...s.operators.subpool, recheckSeconds: -1 } },
      }),
      "subpool",
      "InvalidOperatorConfig",
    ],
  ])("%s", async (_title, odd, stoppedOne, reason) => {
    const kube = seeded();
    const logged: { msg: string; fields?: Record<string, unknown> }[] = [];
    const log = {
      ...silent,
      error: (msg: string, fields?: Record<string, unknown>) =>
        logged.push({ msg, ...(fields ? { fields } : {}) }),
    };
    const kubefn = createKubefn(odd(base()), { ...portsFor(kube), log });
    expect(kubefn.controllers).toEqual(["proxy", "subpool", "site"]);
    expect(logged).toContainEqual({
      msg: "an operator did not start: its primaries say so on Ready; the other operators run",
      fields: { controller: stoppedOne, problems: [expect.stringContaining(stoppedOne)] },
    });
    await kubefn.consume(passes.map((body) => ({ body })));
    const reasons = readyReasons(kube);
    expect(reasons[stoppedOne]).toBe(reason);
    for (const other of ["proxy", "subpool", "site"].filter((c) => c !== stoppedOne)) {
      expect(reasons[other], other).toBeDefined();
      expect(stopped).not.toContain(reasons[other]);
    }
  });
});
