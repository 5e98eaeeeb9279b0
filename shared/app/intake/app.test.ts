import { readFileSync } from "node:fs";
import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { AUDIT_TOKEN, intakeUnderTest, postEvents, RELAY_SECRET } from "../../../test/support/intake-app.ts";
import { proxyController } from "../../../test/unit/runtime/controllers.ts";
import { signBatch } from "../../auth/index.ts";
import { createRegistry, type Message } from "../../runtime/index.ts";
import { createIntakeApp } from "./app.ts";
import { mapWithRegistry } from "./wire.ts";

const NOW = new Date("2026-11-30T12:00:00Z");
const nowSeconds = NOW.getTime() / 1000;
const auditFixture = readFileSync(
  new URL("../../../test/fixtures/audit/mixed.json", import.meta.url),
  "utf8",
);

const relayBody = JSON.stringify({
  kind: "RelayBatch",
  apiVersion: "kubefn.dev/v1",
  events: [
    {
      type: "MODIFIED",
      resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
      object: { metadata: { name: "p1", namespace: "ns1", uid: "u1", generation: 2 } },
    },
    {
      type: "MODIFIED",
      resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
      object: { metadata: { name: "p1", namespace: "ns1", uid: "u1", generation: 3 } },
    },
  ],
});

function setup(maxBodyBytes = 64 * 1024) {
  return intakeUnderTest(NOW, { maxBodyBytes });
}

const post = postEvents;

describe("intake", () => {
  let s: ReturnType<typeof setup>;
  beforeEach(() => {
    s = setup();
  });

  it("accepts an audit EventList with the bearer token and enqueues deduplicated requests", async () => {
    const res = await post(s.app, auditFixture, { authorization: `Bearer ${AUDIT_TOKEN}` });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { enqueued: number; counts: Record<string, number> };
    expect(body.enqueued).toBe(s.enqueued.length);
    expect(s.enqueued.length).toBeGreaterThan(0);
    const keys = s.enqueued.map(
      (m) => `${m.request.controller}/${m.request.namespace ?? ""}/${m.request.name}`,
    );
    expect(new Set(keys).size).toBe(keys.length);
    expect(s.enqueued.every((m) => m.attempt === 0)).toBe(true);
  });

  it("logs each accepted batch once at info: its source and counts, never names or bodies", async () => {
    const audit = await post(s.app, auditFixture, { authorization: `Bearer ${AUDIT_TOKEN}` });
    const relay = await post(s.app, relayBody, await signBatch(RELAY_SECRET, relayBody, nowSeconds));
    const answers = [
      (await audit.json()) as Record<string, unknown>,
      (await relay.json()) as Record<string, unknown>,
    ];
    const lines = s.recorded.logs.filter((l) => l.level === "info");
    expect(lines).toEqual([
      {
        level: "info",
        msg: "intake batch",
        fields: { source: "audit", enqueued: answers[0]!.enqueued, ...(answers[0]!.counts as object) },
      },
      {
        level: "info",
        msg: "intake batch",
        fields: { source: "relay", enqueued: 1, ...(answers[1]!.counts as object) },
      },
    ]);
    for (const line of lines) {
      const { source, ...counts } = line.fields as Record<string, unknown>;
      expect(["audit", "relay"]).toContain(source);
      expect(Object.values(counts).every((v) => typeof v === "number")).toBe(true);
    }
    expect(JSON.stringify(lines)).not.toContain("p1");
  });

  it.each([`bearer ${AUDIT_TOKEN}`, `Bearer\t${AUDIT_TOKEN} `])(
    "reads the audit token with the crawler API's Authorization parser (%j → 202)",
    async (authorization) => {
      expect((await post(s.app, auditFixture, { authorization })).status).toBe(202);
    },
  );

  it("accepts a signed relay batch and collapses two events for one object into one request", async () => {
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const res = await post(s.app, relayBody, headers);
    expect(res.status).toBe(202);
    expect(s.enqueued).toEqual([
      {
        request: { controller: "proxy", namespace: "ns1", name: "p1" },
        attempt: 0,
        trigger: { kind: "relay" },
      },
    ]);
  });

  it.each([
    ["no credentials", {}, 401, "Unauthenticated"],
    ["a wrong bearer token", { authorization: "Bearer nope" }, 401, "Unauthenticated"],
    [
      "a signature without timestamp",
      { "x-kubefn-signature": `sha256=${"0".repeat(64)}` },
      401,
      "MissingSignature",
    ],
    [
      "a malformed signature",
      { "x-kubefn-signature": "md5=abc", "x-kubefn-timestamp": String(nowSeconds) },
      401,
      "MalformedSignature",
    ],
  ] as const)("rejects %s", async (_name, headers, status, reason) => {
    const res = await post(s.app, relayBody, headers);
    expect(res.status).toBe(status);
    expect(((await res.json()) as { reason: string }).reason).toBe(reason);
    expect(s.enqueued).toHaveLength(0);
  });

  it("rejects a batch signed with another secret", async () => {
    const headers = await signBatch("another-secret-0123456789", relayBody, nowSeconds);
    const res = await post(s.app, relayBody, headers);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { reason: string }).reason).toBe("BadSignature");
  });

  it("rejects a body changed after signing", async () => {
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const res = await post(s.app, relayBody.replace("p1", "p2"), headers);
    expect(res.status).toBe(401);
  });

  it("rejects a replayed batch whose timestamp left the window", async () => {
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds - 301);
    const res = await post(s.app, relayBody, headers);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { reason: string }).reason).toBe("StaleTimestamp");
  });

  it("answers 413 for a body over the cap, before reading it whole", async () => {
    const small = setup(1024);
    const res = await post(
      small.app,
      JSON.stringify({ kind: "EventList", items: [], pad: "x".repeat(4096) }),
      {
        authorization: `Bearer ${AUDIT_TOKEN}`,
      },
    );
    expect(res.status).toBe(413);
    expect(small.enqueued).toHaveLength(0);
  });

  it.each([
    ["not JSON", "{not json", "InvalidJSON"],
    ["an unknown envelope", JSON.stringify({ kind: "PodList", items: [] }), "MalformedBatch"],
    ["a relay envelope from the audit sender", relayBody, "MalformedBatch"],
  ])("answers 400 for %s", async (_name, body, reason) => {
    const res = await post(s.app, body, { authorization: `Bearer ${AUDIT_TOKEN}` });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { reason: string }).reason).toBe(reason);
  });

  it("skips malformed events inside a valid batch and counts them", async () => {
    const body = JSON.stringify({
      kind: "EventList",
      apiVersion: "audit.k8s.io/v1",
      items: [42, { stage: 7 }, null],
    });
    const res = await post(s.app, body, { authorization: `Bearer ${AUDIT_TOKEN}` });
    expect(res.status).toBe(202);
    const json = (await res.json()) as { counts: { skipped: number } };
    expect(json.counts.skipped).toBe(3);
  });
});

/** A small deterministic PRNG so a failing fuzz case can be replayed from its seed. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

function randomValue(rnd: () => number, depth: number): unknown {
  const pick = Math.floor(rnd() * (depth > 3 ? 5 : 8));
  switch (pick) {
    case 0:
      return null;
    case 1:
      return rnd() < 0.5;
    case 2:
      return Math.floor(rnd() * 2 ** 31) * (rnd() < 0.5 ? -1 : 1);
    case 3:
      return ["", "ResponseComplete", "create", "status", "proxies", "ns1", "\u0000", "é", "x".repeat(50)][
        Math.floor(rnd() * 9)
      ];
    case 4:
      return rnd() * 1e6;
    case 5:
      return Array.from({ length: Math.floor(rnd() * 4) }, () => randomValue(rnd, depth + 1));
    default: {
      const keys = [
        "kind",
        "apiVersion",
        "items",
        "events",
        "metadata",
        "objectRef",
        "verb",
        "stage",
        "user",
        "responseStatus",
        "requestObject",
        "responseObject",
        "type",
        "resource",
        "object",
        "name",
        "namespace",
        "ownerReferences",
        "code",
        "subresource",
        "apiGroup",
      ];
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(rnd() * 5); i > 0; i--)
        o[keys[Math.floor(rnd() * keys.length)]!] = randomValue(rnd, depth + 1);
      return o;
    }
  }
}

/** Mutations of a valid batch: delete, retype or replace one field somewhere in it. */
function mutate(value: unknown, rnd: () => number): unknown {
  if (value === null || typeof value !== "object") return randomValue(rnd, 3);
  const copy: Record<string, unknown> | unknown[] = Array.isArray(value)
    ? [...value]
    : { ...(value as object) };
  const keys = Object.keys(copy);
  if (keys.length === 0) return randomValue(rnd, 3);
  const key = keys[Math.floor(rnd() * keys.length)]!;
  const r = rnd();
  const target = copy as Record<string, unknown>;
  if (r < 0.2) delete target[key];
  else if (r < 0.5) target[key] = randomValue(rnd, 2);
  else target[key] = mutate(target[key], rnd);
  return copy;
}

describe("intake fuzz", () => {
  it("answers 10,000 random and mutated payloads without a 5xx or a crash", async () => {
    const s = setup();
    const base = [JSON.parse(auditFixture) as unknown, JSON.parse(relayBody) as unknown];
    const rnd = prng(20261130);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 10_000; i++) {
      let body: string;
      const kind = rnd();
      if (kind < 0.15) body = JSON.stringify(randomValue(rnd, 0));
      else if (kind < 0.25) body = auditFixture.slice(0, Math.floor(rnd() * auditFixture.length));
      else {
        let v = base[Math.floor(rnd() * base.length)];
        for (let m = 1 + Math.floor(rnd() * 4); m > 0; m--) v = mutate(v, rnd);
        body = JSON.stringify(v) ?? "null";
      }
      const signed = rnd() < 0.5;
      const headers = signed
        ? await signBatch(RELAY_SECRET, body, nowSeconds)
        : { authorization: `Bearer ${AUDIT_TOKEN}` };
      const res = await post(s.app, body, headers);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status >= 500) throw new Error(`payload ${i} got ${res.status}: ${body.slice(0, 400)}`);
    }
    // Both the accepting and the rejecting paths were exercised.
    expect(statuses.get(202)).toBeGreaterThan(100);
    expect(statuses.get(400)).toBeGreaterThan(1000);
    // 409: the same body signed at the same second is a replay of an accepted batch.
    expect([...statuses.keys()].every((code) => code === 202 || code === 400 || code === 409)).toBe(true);
  }, 120_000);
});

describe("intake as an attacker meets it", () => {
  /** A body that counts how much of it was read, and never ends unless `size` is reached. */
  function countingBody(size: number) {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= size) {
          controller.close();
          return;
        }
        const chunk = new Uint8Array(Math.min(64 * 1024, size - pulled)).fill(0x20);
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    return { stream, pulled: () => pulled };
  }
  const postStream = (
    app: ReturnType<typeof setup>["app"],
    body: ReadableStream,
    headers: Record<string, string>,
  ) =>
    app.request("/v1/events", {
      method: "POST",
      body,
      headers: { "content-type": "application/json", ...headers },
      duplex: "half",
    } as RequestInit);

  it.each([
    ["no credentials", {}],
    ["a wrong bearer token", { authorization: "Bearer nope" }],
    [
      "a stale relay timestamp",
      { "x-kubefn-timestamp": String(nowSeconds - 3600), "x-kubefn-signature": `sha256=${"0".repeat(64)}` },
    ],
    [
      "a future relay timestamp",
      { "x-kubefn-timestamp": String(nowSeconds + 60), "x-kubefn-signature": `sha256=${"0".repeat(64)}` },
    ],
    [
      "a malformed signature",
      { "x-kubefn-timestamp": String(nowSeconds), "x-kubefn-signature": "sha256=zz" },
    ],
  ])("refuses %s before reading a byte of the body", async (_what, headers) => {
    const s = setup();
    const body = countingBody(64 * 1024 * 1024);
    const res = await postStream(s.app, body.stream, headers as Record<string, string>);
    expect(res.status).toBe(401);
    expect(body.pulled()).toBeLessThanOrEqual(64 * 1024); // at most what the stream pre-buffers
    expect(s.enqueued).toEqual([]);
  });

  it("cuts an authenticated body off at the cap, without Content-Length, reading little more than the cap", async () => {
    const s = setup(256 * 1024);
    const body = countingBody(64 * 1024 * 1024);
    const res = await postStream(s.app, body.stream, { authorization: `Bearer ${AUDIT_TOKEN}` });
    expect(res.status).toBe(413);
    expect(body.pulled()).toBeLessThan(512 * 1024);
  });

  it("refuses a relay batch replayed within the window, and a future-dated one", async () => {
    const s = setup();
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    expect((await post(s.app, relayBody, headers)).status).toBe(202);
    const replay = await post(s.app, relayBody, headers);
    expect(replay.status).toBe(409);
    expect(await replay.json()).toMatchObject({ reason: "Replayed" });
    expect(s.enqueued).toHaveLength(1);
    const future = await post(s.app, relayBody, await signBatch(RELAY_SECRET, relayBody, nowSeconds + 120));
    expect(future.status).toBe(401);
    expect(await future.json()).toMatchObject({ reason: "FutureTimestamp" });
  });

  it("refuses a replay whose signature is the same MAC spelled in other letter cases", async () => {
    const s = setup();
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    expect((await post(s.app, relayBody, headers)).status).toBe(202);
    const hex = (headers["x-kubefn-signature"] ?? "").slice("sha256=".length);
    for (const spelling of [hex.toUpperCase(), hex.replace(/[a-f]/, (c) => c.toUpperCase())]) {
      const replay = await post(s.app, relayBody, { ...headers, "x-kubefn-signature": `sha256=${spelling}` });
      expect(replay.status).toBe(409);
    }
    expect(s.enqueued).toHaveLength(1);
  });

  it("a forged signature is not remembered: the real batch still gets through", async () => {
    const s = setup();
    const real = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const forged = await signBatch("not-the-secret-0123456789", relayBody, nowSeconds);
    expect((await post(s.app, relayBody, forged)).status).toBe(401);
    expect((await post(s.app, relayBody, real)).status).toBe(202);
  });

  it("answers 503 with Retry-After beyond the concurrency bound, before reading the body", async () => {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const app = createIntakeApp({
      auditToken: AUDIT_TOKEN,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      maxConcurrentBatches: 2,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      enqueue: () => gate,
    });
    const auth = { authorization: `Bearer ${AUDIT_TOKEN}` };
    const held = [post(app, auditFixture, auth), post(app, auditFixture, auth)];
    await new Promise((r) => setTimeout(r, 20));
    const body = countingBody(1 << 20);
    const busy = await postStream(app, body.stream, auth);
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("1");
    expect(body.pulled()).toBeLessThanOrEqual(64 * 1024);
    release();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([202, 202]);
    expect((await post(app, auditFixture, auth)).status).toBe(202);
  });
});

describe("replays and transient failures", () => {
  it("a batch refused with 503 (enqueue failed) can be sent again under the same signature", async () => {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    let fail = true;
    const app = createIntakeApp({
      relaySecret: RELAY_SECRET,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      enqueue: async () => {
        if (fail) throw new Error("queue unavailable");
      },
    });
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    expect((await post(app, relayBody, headers)).status).toBe(503);
    fail = false;
    expect((await post(app, relayBody, headers)).status).toBe(202);
    expect((await post(app, relayBody, headers)).status).toBe(409);
  });

  it("the same signed batch sent concurrently is enqueued once: check and record are one step", async () => {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    const enqueued: Message[][] = [];
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const app = createIntakeApp({
      relaySecret: RELAY_SECRET,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      // The first copy holds its enqueue open until every copy has been answered or is waiting.
      enqueue: async (messages) => {
        enqueued.push(messages);
        await gate;
      },
    });
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const copies = Array.from({ length: 8 }, () => post(app, relayBody, headers));
    await new Promise((r) => setTimeout(r, 50));
    open();
    const statuses = (await Promise.all(copies)).map((r) => r.status);
    expect(enqueued).toHaveLength(1);
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    // The others were answered while the first was in flight: "retry" (503), never a second 202.
    expect(statuses.filter((s) => s !== 202).every((s) => s === 503 || s === 409)).toBe(true);
    // Once the first is accepted, the batch is a replay.
    expect((await post(app, relayBody, headers)).status).toBe(409);
  });

  it("a copy that arrived while the first was in flight gets through when the first fails", async () => {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    let calls = 0;
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const app = createIntakeApp({
      relaySecret: RELAY_SECRET,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      enqueue: async () => {
        calls++;
        if (calls === 1) {
          await gate;
          throw new Error("queue unavailable");
        }
      },
    });
    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const first = post(app, relayBody, headers);
    await new Promise((r) => setTimeout(r, 20));
    const during = await post(app, relayBody, headers);
    expect(during.status).toBe(503);
    expect(during.headers.get("retry-after")).toBe("1");
    open();
    expect((await first).status).toBe(503);
    expect((await post(app, relayBody, headers)).status).toBe(202);
  });
});

describe("bodies sent slowly, by anyone who can write well-formed signature headers", () => {
  /** One byte now, then nothing: the connection stays open until the reader gives up. */
  function stalledBody() {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("{"));
      },
      cancel() {
        cancelled = true;
      },
    });
    return { stream, cancelled: () => cancelled };
  }
  // Headers that pass the header check (format, timestamp) without knowing the secret.
  const forgedHeaders = {
    "x-kubefn-signature": `sha256=${"ab".repeat(32)}`,
    "x-kubefn-timestamp": String(nowSeconds),
  };

  function bounded(extra: { bodyTimeoutMs?: number }) {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    const enqueued: Message[] = [];
    const app = createIntakeApp({
      relaySecret: RELAY_SECRET,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      maxConcurrentBatches: 1,
      ...extra,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      enqueue: async (m) => {
        enqueued.push(...m);
      },
    });
    return { app, enqueued };
  }
  const send = (
    app: ReturnType<typeof bounded>["app"],
    path: string,
    body: BodyInit,
    headers: Record<string, string>,
  ) => app.request(path, { method: "POST", body, headers, duplex: "half" } as RequestInit);

  it("a stalled body is answered 408 at the body deadline and frees its slot for the relay", async () => {
    const { app, enqueued } = bounded({ bodyTimeoutMs: 50 });
    const slow = stalledBody();
    const res = await send(app, "/v1/events", slow.stream, forgedHeaders);
    expect(res.status).toBe(408);
    expect(await res.json()).toMatchObject({ reason: "BodyTimeout" });
    expect(slow.cancelled()).toBe(true);
    const real = await send(
      app,
      "/v1/events",
      relayBody,
      await signBatch(RELAY_SECRET, relayBody, nowSeconds),
    );
    expect(real.status).toBe(202);
    expect(enqueued).toHaveLength(1);
  });

  it("forged relay headers and bodies a byte at a time hold no slot: the relay's batch is served meanwhile (issue 30, Low)", async () => {
    // One slot; a body still arriving on each entry, with headers anyone can write.
    const { app, enqueued } = bounded({ bodyTimeoutMs: 2000 });
    const slow = [stalledBody(), stalledBody()];
    const held = [
      send(app, "/v1/events", slow[0]!.stream, forgedHeaders),
      send(app, "/v1/events/pubsub", slow[1]!.stream, {
        ...forgedHeaders,
        "x-kubefn-timestamp": String(nowSeconds - 1),
      }),
    ];
    await new Promise((r) => setTimeout(r, 20));
    const real = await send(
      app,
      "/v1/events",
      relayBody,
      await signBatch(RELAY_SECRET, relayBody, nowSeconds),
    );
    expect(real.status).toBe(202);
    expect(enqueued).toHaveLength(1);
    for (const h of held) expect((await h).status).toBe(408);
    expect(slow.map((b) => b.cancelled())).toEqual([true, true]);
  });

  it("bodies that have sent the whole byte budget and hold it make the next wait (503), until they are cut off", async () => {
    // One slot of 1 MiB: a body that sent all but a byte of it, then stalls.
    const { app } = bounded({ bodyTimeoutMs: 300 });
    const almostAll = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array((1 << 20) - 1));
      },
    });
    const held = send(app, "/v1/events", almostAll, forgedHeaders);
    await new Promise((r) => setTimeout(r, 20));
    const signed = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const during = await send(app, "/v1/events/pubsub", relayBody, signed);
    expect(during.status).toBe(503);
    expect(during.headers.get("retry-after")).toBe("1");
    expect((await held).status).toBe(408);
    expect((await send(app, "/v1/events", relayBody, signed)).status).toBe(202);
  });
});

describe("credentials read per request (a platform that re-reads rotated secrets)", () => {
  it("a rotated relay secret and audit token are used from the next request, the old ones refused", async () => {
    const registry = createRegistry([proxyController()]);
    const { ctx } = fakeContext(new FakeKube(), { now: NOW });
    let credentials = { auditToken: AUDIT_TOKEN, relaySecret: RELAY_SECRET };
    const app = createIntakeApp({
      // The fixed values lose to the port.
      auditToken: "fixed-audit-token-0123456789",
      relaySecret: "fixed-relay-secret-0123456789",
      credentials: () => credentials,
      maxBodyBytes: 64 * 1024,
      replayWindowSeconds: 300,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, registry, []),
      enqueue: async () => {},
    });
    const relay = async (secret: string) =>
      (await post(app, relayBody, await signBatch(secret, relayBody, nowSeconds))).status;
    const audit = async (token: string) =>
      (await post(app, auditFixture, { authorization: `Bearer ${token}` })).status;
    expect([await audit(AUDIT_TOKEN), await audit("fixed-audit-token-0123456789")]).toEqual([202, 401]);
    expect(await relay(RELAY_SECRET)).toBe(202);

    credentials = {
      auditToken: "rotated-audit-token-0123456789",
      relaySecret: "rotated-relay-secret-0123456789",
    };
    expect([await audit("rotated-audit-token-0123456789"), await audit(AUDIT_TOKEN)]).toEqual([202, 401]);
    expect([await relay("rotated-relay-secret-0123456789"), await relay(RELAY_SECRET)]).toEqual([202, 401]);
  });
});
