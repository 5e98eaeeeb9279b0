/**
 * The seam's consume loop: one message guard, one verdict per item, passes apart from jobs, and
 * the envelope every message it sends carries (version and trace).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import type { KubeObject } from "../runtime/core/index.ts";
import {
  createRegistry,
  done,
  ENVELOPE_VERSION,
  type HopEnd,
  type HopKind,
  type JobMessage,
  type Message,
  messageAuthenticatorFrom,
  type PassContext,
  type PassMessage,
  requeueAfter,
  type Spans,
  type TraceContext,
} from "../runtime/index.ts";
import { createKubefn } from "./kubefn.ts";

const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const STATUS_SEAL_KEY = "seal-key-0123456789abcdef0123456789";
/** kubefn's MAC over a message's bodies, as its own sends carry it. */
const kubefnsMac = messageAuthenticatorFrom({ statusSealKey: STATUS_SEAL_KEY })!;
const pass: PassMessage = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };
const job: JobMessage = {
  kind: "job",
  v: ENVELOPE_VERSION,
  job: { controller: "proxy", task: "probe", slot: "0", objects: [] },
};
const withObjects = (m: JobMessage, objects: KubeObject[], task = "probe"): JobMessage => ({
  ...m,
  job: { ...m.job, task, objects },
});

const proxyBody = (host: string) => ({
  apiVersion: "crawl.example.com/v1alpha1",
  kind: "Proxy",
  metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
  spec: { mode: "External", endpoint: { host } },
});

function kubefnWith(
  reconcile: (ctx: PassContext) => Promise<ReturnType<typeof done>>,
  opts: { throwOnPassLine?: boolean; cluster?: string; spans?: Spans } = {},
) {
  const kube = new FakeKube();
  kube.seed(ProxyResource, {
    apiVersion: "crawl.example.com/v1alpha1",
    kind: "Proxy",
    metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
    spec: {},
  });
  const { ctx, recorded } = fakeContext(kube);
  const log = opts.throwOnPassLine
    ? {
        ...ctx.log,
        info: (msg: string, fields?: Record<string, unknown>) => {
          if (msg === "pass") throw new Error("log sink failed");
          ctx.log.info(msg, fields);
        },
      }
    : {
        ...ctx.log,
        debug: (msg: string, fields?: Record<string, unknown>) =>
          void recorded.logs.push({ level: "debug", msg, ...(fields ? { fields } : {}) }),
      };
  const jobs: unknown[] = [];
  const controller = proxyController({
    reconcile,
    jobs: {
      probe: async (_ctx, objects) => {
        jobs.push(objects);
        return { probed: objects.length };
      },
    },
  });
  const settings = parseWorkerEnv({
    KUBE_SERVER: "https://kube.example.com",
    KUBE_TOKEN: "t",
    STATUS_SEAL_KEY,
  });
  const kubefn = createKubefn(
    settings,
    {
      ...(opts.cluster ? { cluster: opts.cluster } : {}),
      ...(opts.spans ? { spans: opts.spans } : {}),
      kube,
      queue: ctx.queue,
      prober: { probe: async () => ({ ok: true }) } as never,
      log,
      metrics: ctx.metrics,
      clock: ctx.clock,
      random: () => 0.5,
    },
    { registry: createRegistry([controller]), sweepTasks: [] },
  );
  return { kubefn, recorded, jobs, kube };
}

describe("consume", () => {
  it("acks a pass and returns its result", async () => {
    const { kubefn } = kubefnWith(async () => done());
    const [verdict] = await kubefn.consume([{ body: pass }]);
    expect(verdict).toMatchObject({ ack: true, pass: { key: "proxy/ns1/p1", result: "done" } });
  });

  it("runs a job with its controller's job handler, not as a pass: no read of the primary, no pass line", async () => {
    let reconciled = 0;
    const { kubefn, recorded, jobs, kube } = kubefnWith(async () => {
      reconciled++;
      return done();
    });
    const [verdict] = await kubefn.consume([{ body: await kubefnsMac.sign(job) }]);
    expect(verdict).toEqual({ ack: true });
    // The admission gate's two lists aside (shared/app/admission).
    const reads = kube.calls.filter((c) => !c.resource.startsWith("validatingadmissionpolic"));
    expect([jobs.length, reconciled, reads.length]).toEqual([1, 0, 0]);
    expect(recorded.logs.map((l) => l.msg)).toEqual(["job"]);
    expect(recorded.logs[0]?.fields).toMatchObject({ task: "probe", result: "done", shard: { probed: 0 } });
  });

  it("acks and drops a body that is not a kubefn message", async () => {
    const { kubefn, recorded } = kubefnWith(async () => done());
    expect(await kubefn.consume([{ body: { hello: "world" } }])).toEqual([{ ack: true, dropped: true }]);
    expect(recorded.logs.map((l) => [l.level, l.msg])).toEqual([
      ["error", "queue message is not a kubefn message; dropped"],
    ]);
  });

  it.each([
    [1, 1],
    [3, 3],
    [5, 12],
  ])(
    "retries a newer release's message on delivery %s after %s s, never running it",
    async (attempts, delay) => {
      let reconciled = 0;
      const { kubefn } = kubefnWith(async () => {
        reconciled++;
        return done();
      });
      const verdicts = await kubefn.consume([{ body: { ...pass, v: ENVELOPE_VERSION + 1 }, attempts }]);
      expect(verdicts).toEqual([{ ack: false, retryAfterSeconds: delay }]);
      expect(reconciled).toBe(0);
    },
  );

  it("retries a crashed pass (its log sink threw) with backoff by delivery, and acks the rest", async () => {
    const { kubefn } = kubefnWith(async () => done(), { throwOnPassLine: true });
    const verdicts = await kubefn.consume([
      { body: pass, attempts: 3 },
      { body: await kubefnsMac.sign(job) },
    ]);
    expect(verdicts).toEqual([{ ack: false, retryAfterSeconds: 3 }, { ack: true }]);
  });

  it("acks a pass whose controller threw: runPass reports that as a follow-up, not a crash", async () => {
    const { kubefn, recorded } = kubefnWith(async () => {
      throw new Error("boom");
    });
    expect((await kubefn.consume([{ body: pass }]))[0]).toMatchObject({
      ack: true,
      pass: { result: "error" },
    });
    expect(recorded.sent).toHaveLength(1);
  });

  it("gives a pass's follow-up the envelope version and the trace of the message that caused it", async () => {
    const { kubefn, recorded } = kubefnWith(async () => requeueAfter(30));
    await kubefn.consume([{ body: { ...pass, traceparent: parent } }]);
    const [followUp] = recorded.sent.flatMap((s) => s.messages);
    expect(followUp?.v).toBe(ENVELOPE_VERSION);
    expect(followUp?.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(followUp?.traceparent).not.toBe(parent);
    const line = recorded.logs.find((l) => l.msg === "pass");
    expect(line?.fields).toMatchObject({ trace: "0af7651916cd43dd8448eb211c80319c" });
  });
});

describe("bodies on the queue carry kubefn's MAC (issue 30)", () => {
  it.each([
    ["without a MAC", async (m: JobMessage) => m],
    [
      "with a MAC of another key",
      async (m: JobMessage) =>
        messageAuthenticatorFrom({ statusSealKey: "a-key-the-sender-chose-0123" })!.sign(m),
    ],
    [
      "with kubefn's MAC over other objects",
      async (m: JobMessage) => ({ ...(await kubefnsMac.sign(job)), job: m.job }),
    ],
  ])("a job %s is refused, counted and acked: its handler never sees the objects", async (_, mac) => {
    const { kubefn, recorded, jobs } = kubefnWith(async () => done());
    const forged = withObjects(job, [proxyBody("198.51.100.66")]);
    expect(await kubefn.consume([{ body: await mac(forged) }])).toEqual([{ ack: true, dropped: true }]);
    expect(jobs).toEqual([]);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_dropped_total",
      labels: { reason: "unauthenticated" },
    });
  });

  it("a pass whose listed objects do not verify runs without them: it reads them itself, counted", async () => {
    const { kubefn, recorded, kube } = kubefnWith(async () => done());
    const listed = { apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "ns1" } };
    const body = {
      ...pass,
      trigger: { kind: "drift" as const, reason: "generation" },
      listed: [listed],
      listedAt: Date.now(),
    };
    const [verdict] = await kubefn.consume([{ body }]);
    expect(verdict).toMatchObject({ ack: true, pass: { result: "done" } });
    expect(recorded.counts).toContainEqual({ name: "kubefn_message_bodies_stripped_total", labels: {} });
    expect(kube.calls.filter((c) => c.method === "get" && c.resource === "proxies")).toHaveLength(1);
  });

  it("what kubefn sends is signed, and verifies where it is consumed", async () => {
    const { kubefn, recorded } = kubefnWith(async () => done());
    // A sweep page is signed on the way out (the fake queue records what was sent).
    await kubefn.sweep({ full: true });
    const sent = recorded.sent.flatMap((s) => s.messages);
    for (const m of sent) expect(await kubefnsMac.verify(m)).toBe(true);
    // A job's MAC is a set, so that a piece of a shard a platform cut (SQS) still verifies: the
    // frame's, one an object's, and the whole job's.
    const objects = [
      proxyBody("203.0.113.7"),
      { ...proxyBody("203.0.113.8"), metadata: { name: "p2", namespace: "ns1" } },
    ];
    const signedJob = await kubefnsMac.sign(withObjects(job, objects));
    expect(signedJob.mac).toHaveLength(4);
    const piece = withObjects({ ...(signedJob as JobMessage), job: { ...job.job, slot: "0-2" } }, [
      objects[1]!,
    ]);
    expect(await kubefnsMac.verify(piece)).toBe(true);
    const swapped = withObjects(piece, [proxyBody("198.51.100.66")]);
    expect(await kubefnsMac.verify(swapped)).toBe(false);
    const retasked = withObjects(piece, [objects[1]!], "other");
    expect(await kubefnsMac.verify(retasked)).toBe(false);
  });
});

describe("a trigger reason on the queue steers no pass unless kubefn sent it (issue 30, Low)", () => {
  const told = () => {
    const seen: { followUp: string | undefined; drift: string | undefined; event?: string | undefined }[] =
      [];
    const { kubefn, recorded } = kubefnWith(async (ctx) => {
      seen.push({ followUp: ctx.followUp, drift: ctx.drift, ...(ctx.event ? { event: ctx.event } : {}) });
      return done();
    });
    return { kubefn, recorded, seen };
  };

  it.each([
    ["follow-up", "waiting"],
    ["drift", "status:Ready"],
    ["audit", "waiting"],
    ["audit", "owned-status"],
    ["relay", "owned-status"],
  ] as const)(
    "a key-only message whose trigger says %s:%s, without kubefn's MAC: its pass is not told the reason",
    async (kind, reason) => {
      const { kubefn, seen } = told();
      const forged: Message = { ...pass, trigger: { kind, reason } };
      expect(await kubefn.consume([{ body: forged }])).toMatchObject([{ ack: true }]);
      expect(seen).toEqual([{ followUp: undefined, drift: undefined }]);
    },
  );

  it("kubefn's own follow-up, with its MAC, is told its reason", async () => {
    const { kubefn, seen } = told();
    const own = await kubefnsMac.sign({ ...pass, trigger: { kind: "follow-up", reason: "waiting" } });
    expect(own.mac).toBeDefined();
    expect(await kubefn.consume([{ body: own }])).toMatchObject([{ ack: true }]);
    expect(seen).toEqual([{ followUp: "waiting", drift: undefined }]);
  });

  it("kubefn's intake message for an owned object's status write, with its MAC, is told its reason", async () => {
    const { kubefn, seen } = told();
    const own = await kubefnsMac.sign({ ...pass, trigger: { kind: "audit", reason: "owned-status" } });
    expect(own.mac).toBeDefined();
    expect(await kubefn.consume([{ body: own }])).toMatchObject([{ ack: true }]);
    expect(seen).toEqual([{ followUp: undefined, drift: undefined, event: "owned-status" }]);
  });
});

describe("a seal key derived from a channel's secret (issue 30, Low)", () => {
  const start = (env: Record<string, string>) => {
    const { ctx, recorded } = fakeContext(new FakeKube());
    createKubefn(
      parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t", ...env }),
      { kube: ctx.kube, queue: ctx.queue, prober: {} as never, log: ctx.log, metrics: ctx.metrics },
      { registry: createRegistry([proxyController({ reconcile: async () => done() })]), sweepTasks: [] },
    );
    return recorded.logs.filter((l) => l.level === "warn" && l.msg.includes("seal"));
  };

  it.each([
    ["RELAY_SECRET", { RELAY_SECRET: "relay-secret-0123456789abcdef" }],
    ["AUDIT_TOKEN", { AUDIT_TOKEN: "audit-token-0123456789abcdef" }],
  ])(
    "without STATUS_SEAL_KEY the seal's key comes from %s, which a channel writer holds: said at start",
    (name, env) => {
      const warnings = start(env);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.msg).toContain(`the status seal's key is derived from ${name}`);
      expect(warnings[0]?.msg).toContain("set STATUS_SEAL_KEY");
    },
  );

  it("with STATUS_SEAL_KEY nothing is said", () => {
    expect(start({ RELAY_SECRET: "relay-secret-0123456789abcdef", STATUS_SEAL_KEY })).toEqual([]);
  });
});

describe("messages the previous release left on the queue (envelope version 1)", () => {
  it("its signed probe shard (a pass-shaped request with a shard) runs as the job it is", async () => {
    const objects = [proxyBody("203.0.113.7")];
    // Version 1's MACs covered the job's frame and objects, never the request's name.
    const { mac } = await kubefnsMac.sign({
      ...withObjects(job, objects),
      job: { ...job.job, objects, due: 7 },
    });
    // The message as version 1 wrote it (the envelope's reader test reads the same fixture).
    const version1Job = JSON.parse(
      readFileSync(
        new URL("../../test/fixtures/messages/envelope-v1/probe-shard-job.json", import.meta.url),
        "utf8",
      ),
    ) as { shard: { task: string } };
    const body = { ...version1Job, shard: { ...version1Job.shard, objects, due: 7 }, mac };
    const { kubefn, recorded, jobs } = kubefnWith(async () => done());
    expect(await kubefn.consume([{ body }])).toEqual([{ ack: true }]);
    expect(jobs).toEqual([objects]);
    expect(recorded.logs.find((l) => l.msg === "job")?.fields).toMatchObject({
      key: "job:proxy/probe/probe-30-0",
      task: "probe",
      result: "done",
    });
    // The same with an object swapped in: refused, as a forged job of this version is.
    const forged = { ...body, shard: { ...body.shard, objects: [proxyBody("198.51.100.66")] } };
    const again = kubefnWith(async () => done());
    expect(await again.kubefn.consume([{ body: forged }])).toEqual([{ ack: true, dropped: true }]);
    expect(again.jobs).toEqual([]);
  });

  it("its pass (version 1, unchanged) runs as a pass", async () => {
    const { kubefn, recorded } = kubefnWith(async () => done());
    const [verdict] = await kubefn.consume([{ body: { ...pass, v: 1, trigger: { kind: "audit" } } }]);
    expect(verdict).toMatchObject({ ack: true, pass: { result: "done" } });
    expect(recorded.logs.at(-1)?.msg).toBe("pass");
  });
});

describe("messages the previous release left on the queue (envelope version 2): the default cluster's", () => {
  const fixture = (file: string) =>
    JSON.parse(
      readFileSync(new URL(`../../test/fixtures/messages/envelope-v2/${file}`, import.meta.url), "utf8"),
    ) as Message;

  it("its signed probe shard runs (its MACs, which named no cluster, still verify)", async () => {
    const { kubefn, jobs } = kubefnWith(async () => done());
    expect(await kubefn.consume([{ body: fixture("probe-shard-job.json") }])).toEqual([{ ack: true }]);
    expect(jobs).toHaveLength(1);
  });

  it("its reasoned follow-up runs with its reason (not stripped)", async () => {
    const { kubefn, recorded } = kubefnWith(async () => done());
    const [verdict] = await kubefn.consume([{ body: fixture("follow-up-pass.json") }]);
    expect(verdict).toMatchObject({ ack: true, pass: { key: "proxy/ns1/p1", trigger: "follow-up:waiting" } });
    expect(recorded.logs.map((l) => l.msg)).not.toContain(
      "queue message's bodies do not carry kubefn's MAC; the pass reads them itself",
    );
  });

  it("is not run by a declared cluster's kubefn: it is the default cluster's", async () => {
    const { kubefn, jobs, recorded } = kubefnWith(async () => done(), { cluster: "east" });
    expect(await kubefn.consume([{ body: fixture("probe-shard-job.json") }])).toEqual([
      { ack: true, dropped: true },
    ]);
    expect(jobs).toEqual([]);
    expect(recorded.logs.at(-1)).toMatchObject({ msg: "queue message is another cluster's; dropped" });
  });
});

describe("a message names its cluster (envelope version 3)", () => {
  it("every message a kubefn sends names its cluster", async () => {
    const { kubefn, recorded } = kubefnWith(async () => requeueAfter(30), { cluster: "east" });
    await kubefn.consume([{ body: { ...pass, v: ENVELOPE_VERSION, cluster: "east" } }]);
    const sent = recorded.sent.flatMap((s) => s.messages);
    expect(sent.map((m) => [m.cluster, m.v])).toEqual([["east", ENVELOPE_VERSION]]);
  });

  it("another cluster's message is dropped, never run against this cluster's API server", async () => {
    let reconciled = 0;
    const { kubefn, recorded } = kubefnWith(
      async () => {
        reconciled++;
        return done();
      },
      { cluster: "east" },
    );
    const [verdict] = await kubefn.consume([{ body: { ...pass, v: ENVELOPE_VERSION, cluster: "west" } }]);
    expect(verdict).toEqual({ ack: true, dropped: true });
    expect(reconciled).toBe(0);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_dropped_total",
      labels: { reason: "other-cluster" },
    });
    const [own] = await kubefn.consume([{ body: { ...pass, v: ENVELOPE_VERSION, cluster: "east" } }]);
    expect(own).toMatchObject({ ack: true, pass: { result: "done" } });
    expect(reconciled).toBe(1);
  });

  it("a job signed for one cluster, relabelled for another, is refused there (the MAC covers the cluster)", async () => {
    const objects = [proxyBody("203.0.113.7")];
    const east = await kubefnsMac.sign({ ...withObjects(job, objects), cluster: "east" });
    const west = kubefnWith(async () => done(), { cluster: "west" });
    expect(await west.kubefn.consume([{ body: { ...east, cluster: "west" } }])).toEqual([
      { ack: true, dropped: true },
    ]);
    expect(west.jobs).toEqual([]);
    const inEast = kubefnWith(async () => done(), { cluster: "east" });
    expect(await inEast.kubefn.consume([{ body: east }])).toEqual([{ ack: true }]);
    expect(inEast.jobs).toEqual([objects]);
  });
});

describe("messages the 0.1.0 release left on the queue", () => {
  it("probe-shard-job.json (no MAC) is acked and dropped as unauthenticated: the next sweep plans its probes again", async () => {
    const body = JSON.parse(
      readFileSync(
        new URL("../../test/fixtures/messages/0.1.0/probe-shard-job.json", import.meta.url),
        "utf8",
      ),
    ) as Message;
    const { kubefn, jobs } = kubefnWith(async () => done());
    expect(await kubefn.consume([{ body }])).toEqual([{ ack: true, dropped: true }]);
    expect(jobs).toEqual([]);
  });

  it.each(["follow-up-pass.json", "cluster-scoped-audit-pass.json", "drift-pass-with-snapshot.json"])(
    "%s is consumed by this release and acked (a snapshot is not read: the pass GETs its primary)",
    async (file) => {
      const body = JSON.parse(
        readFileSync(new URL(`../../test/fixtures/messages/0.1.0/${file}`, import.meta.url), "utf8"),
      ) as Message;
      const { kubefn, recorded } = kubefnWith(async () => done());
      const [verdict] = await kubefn.consume([{ body }]);
      expect(verdict?.ack).toBe(true);
      expect(verdict && "dropped" in verdict).toBe(false);
      // A pass line; never "not a kubefn message" (this test's registry has no SubPool
      // controller: that pass fails as UnknownController, read whole).
      const lines = recorded.logs.map((l) => l.msg);
      expect(lines.at(-1)).toBe("pass");
      expect(lines).not.toContain("queue message is not a kubefn message; dropped");
    },
  );
});

describe("traces", () => {
  it("each intake batch starts a trace of its own, carried by the messages it enqueued", async () => {
    const kube = new FakeKube();
    const { ctx, recorded } = fakeContext(kube);
    const token = "audit-token-1234567890";
    const settings = parseWorkerEnv({
      KUBE_SERVER: "https://kube.example.com",
      KUBE_TOKEN: "t",
      AUDIT_TOKEN: token,
    });
    const kubefn = createKubefn(
      settings,
      {
        kube,
        queue: ctx.queue,
        prober: { probe: async () => ({ ok: true }) } as never,
        log: ctx.log,
        metrics: ctx.metrics,
      },
      { registry: createRegistry([proxyController()]), sweepTasks: [] },
    );
    const event = (name: string) => ({
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      level: "Metadata",
      auditID: `a-${name}`,
      stage: "ResponseComplete",
      verb: "create",
      user: { username: "alice" },
      objectRef: {
        resource: "proxies",
        namespace: "ns1",
        name,
        apiGroup: "crawl.example.com",
        apiVersion: "v1alpha1",
      },
      responseStatus: { code: 201 },
    });
    for (const name of ["p1", "p2"]) {
      const res = await kubefn.fetch(
        new Request("http://kubefn/v1/events", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [event(name)] }),
        }),
      );
      expect(res.status).toBe(202);
    }
    const traces = recorded.sent.flatMap((s) => s.messages).map((m) => m.traceparent?.split("-")[1]);
    expect(traces).toHaveLength(2);
    expect(traces.every((t) => /^[0-9a-f]{32}$/.test(t ?? ""))).toBe(true);
    expect(traces[0]).not.toBe(traces[1]);
    // Each batch's own line carries the trace its messages carry, and a span of its own.
    const batchLines = recorded.logs.filter((l) => l.msg === "intake batch").map((l) => l.fields ?? {});
    expect(batchLines.map((f) => f.trace)).toEqual(traces);
    expect(batchLines.every((f) => /^[0-9a-f]{16}$/.test(String(f.span)))).toBe(true);
  });

  it("tells the spans port of each hop with the ids its lines print: the batch, then its pass as a child", async () => {
    const kube = new FakeKube();
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
    });
    const { ctx, recorded } = fakeContext(kube);
    const token = "audit-token-1234567890";
    const heard: Array<{ kind: HopKind; trace: TraceContext; end?: HopEnd }> = [];
    const spans: Spans = {
      start(kind, trace) {
        const hop: (typeof heard)[number] = { kind, trace };
        heard.push(hop);
        return (end) => {
          hop.end = end;
        };
      },
    };
    const kubefn = createKubefn(
      parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t", AUDIT_TOKEN: token }),
      {
        kube,
        queue: ctx.queue,
        prober: { probe: async () => ({ ok: true }) } as never,
        log: ctx.log,
        metrics: ctx.metrics,
        spans,
      },
      {
        registry: createRegistry([proxyController({ reconcile: async () => requeueAfter(30) })]),
        sweepTasks: [],
      },
    );
    const res = await kubefn.fetch(
      new Request("http://kubefn/v1/events", {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({
          kind: "EventList",
          apiVersion: "audit.k8s.io/v1",
          items: [
            {
              kind: "Event",
              apiVersion: "audit.k8s.io/v1",
              level: "Metadata",
              auditID: "a-1",
              stage: "ResponseComplete",
              verb: "create",
              user: { username: "alice" },
              objectRef: { resource: "proxies", namespace: "ns1", name: "p1", apiGroup: "crawl.example.com" },
              responseStatus: { code: 201 },
            },
          ],
        }),
      }),
    );
    expect(res.status).toBe(202);
    const [batch] = heard;
    expect(batch).toMatchObject({ kind: "intake", end: { result: "done", source: "audit", enqueued: 1 } });
    expect(batch?.trace.parentSpanId).toBeUndefined();
    expect(recorded.logs.find((l) => l.msg === "intake batch")?.fields).toMatchObject({
      trace: batch?.trace.traceId,
      span: batch?.trace.spanId,
    });
    const [message] = recorded.sent.flatMap((s) => s.messages);
    expect(message?.traceparent).toBe(batch?.trace.traceparent);

    await kubefn.consume([{ body: message }]);
    const pass = heard[1];
    expect(pass?.kind).toBe("pass");
    expect(pass?.trace).toMatchObject({ traceId: batch?.trace.traceId, parentSpanId: batch?.trace.spanId });
    expect(pass?.end).toEqual({
      request: { controller: "proxy", namespace: "ns1", name: "p1", kind: "Proxy" },
      result: "requeue",
      trigger: "audit",
      cluster: "default",
    });
    expect(recorded.logs.find((l) => l.msg === "pass")?.fields).toMatchObject({ span: pass?.trace.spanId });
  });

  it("a declared cluster's hop names its cluster to the spans port, and its debug lines keep their trace (issue 35)", async () => {
    const ended: HopEnd[] = [];
    const spans: Spans = { start: () => (end) => void ended.push(end) };
    const { kubefn, recorded } = kubefnWith(
      async (ctx) => {
        ctx.log.debug?.("looked", { at: "p1" });
        return done();
      },
      { cluster: "east", spans },
    );
    await kubefn.consume([{ body: { ...pass, v: ENVELOPE_VERSION, cluster: "east" } }]);
    expect(ended).toEqual([expect.objectContaining({ result: "done", cluster: "east" })]);
    const debug = recorded.logs.find((l) => l.level === "debug" && l.msg === "looked");
    expect(debug?.fields).toMatchObject({ at: "p1", trace: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });
});
