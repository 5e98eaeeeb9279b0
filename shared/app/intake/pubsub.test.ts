/**
 * `POST /v1/events/pubsub` with real-shaped Pub/Sub push deliveries of GKE audit LogEntries
 * (test/fixtures/gke), through the real operators' registry: the answer Pub/Sub acts on (2xx ack,
 * anything else redelivers) and what was enqueued.
 */
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { createTokenSigner, type TokenSigner } from "../../../test/fixtures/google-tokens.ts";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { pushBodyOf } from "../../audit-export/index.ts";
import { type KeySource, KeysUnavailableError, signBatch, staticKeys } from "../../auth/index.ts";
import { proxyResource } from "../../controllers/proxy/api.ts";
import type { PassMessage } from "../../runtime/index.ts";
import { createOperators } from "../operators.ts";
import { createIntakeApp } from "./app.ts";
import { mapWithRegistry } from "./wire.ts";

const AUD = "https://kubefn.example.com/v1/events/pubsub";
const SA = "kubefn-push@kubefn-demo.iam.gserviceaccount.com";
const RELAY_SECRET = "relay-secret-0123456789abcdef";
const NS = "audit-fixtures";
const gke = (name: string): string =>
  readFileSync(new URL(`../../../test/fixtures/gke/${name}`, import.meta.url), "utf8");
const operators = createOperators({
  prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
  sweepPeriodSeconds: 60,
});

let signer: TokenSigner;
beforeAll(async () => {
  signer = await createTokenSigner();
});

function setup(opts: { keys?: KeySource; maxBodyBytes?: number; failEnqueue?: boolean } = {}) {
  const kube = new FakeKube();
  kube.seed(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: NS, name: "p1", uid: "uid-p1" },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "ci" } } },
  });
  const { ctx, recorded } = fakeContext(kube, { now: new Date() });
  const enqueued: PassMessage[] = [];
  const app = createIntakeApp({
    relaySecret: RELAY_SECRET,
    pubsub: { token: { audience: AUD, serviceAccountEmail: SA, keys: opts.keys ?? staticKeys(signer.jwks) } },
    maxBodyBytes: opts.maxBodyBytes ?? 256 * 1024,
    replayWindowSeconds: 300,
    clock: ctx.clock,
    log: ctx.log,
    metrics: ctx.metrics,
    map: mapWithRegistry(ctx, operators.registry, ["system:serviceaccount:kubefn-system:kubefn"]),
    enqueue: async (messages) => {
      if (opts.failEnqueue) throw new Error("queue unavailable");
      enqueued.push(...messages);
    },
  });
  const push = (body: string, headers: Record<string, string>) =>
    app.request("/v1/events/pubsub", {
      method: "POST",
      body,
      headers: { "content-type": "application/json", ...headers },
    });
  return { app, push, enqueued, recorded };
}

const bearer = async (claims: Record<string, unknown> = {}) => ({
  authorization: `Bearer ${await signer.sign({ aud: AUD, email: SA, ...claims })}`,
});
const wrap = (entryFile: string) =>
  JSON.stringify(
    pushBodyOf(JSON.parse(gke(entryFile)), "1", "projects/kubefn-demo/subscriptions/kubefn-audit"),
  );

describe("Pub/Sub push intake of GKE audit logs", () => {
  it("the documented push of a CR's Metadata-level entry → 202 and one request for the Proxy", async () => {
    const s = setup();
    const res = await s.push(gke("push-proxy-create.json"), await bearer());
    expect(res.status).toBe(202);
    const body = await res.json();
    expect(body).toMatchObject({
      source: "pubsub",
      messageId: "13697034826148791",
      enqueued: 1,
      requests: [{ controller: "proxy", namespace: NS, name: "p1" }],
    });
    expect(s.enqueued).toEqual([
      { request: { controller: "proxy", namespace: NS, name: "p1" }, attempt: 0, trigger: { kind: "audit" } },
    ]);
  });

  it.each([
    ["secret-update-metadata.json", [{ controller: "proxy", namespace: NS, name: "p1" }]],
    ["statefulset-update-request-response.json", [{ controller: "subpool", name: "team-a" }]],
    ["subpool-delete-metadata.json", [{ controller: "subpool", name: "team-a" }]],
  ])("%s → 202 with the webhook's requests", async (file, requests) => {
    const s = setup();
    const res = await s.push(wrap(file), await bearer());
    expect(res.status).toBe(202);
    expect(s.enqueued.map((m) => m.request)).toEqual(requests);
  });

  it("a push subscription without the wrapper (--push-no-wrapper) posts the LogEntry itself", async () => {
    const s = setup();
    const res = await s.push(gke("proxy-create-metadata.json"), await bearer());
    expect(res.status).toBe(202);
    expect(s.enqueued).toHaveLength(1);
  });

  it.each([
    ["a status write", "proxy-status-patch.json"],
    ["a failed create", "proxy-create-conflict.json"],
    ["kubefn's own write", "self-write.json"],
    ["a Pod nobody registered owns", "pod-create-request-response.json"],
  ])("%s → 202 acknowledged, nothing enqueued", async (_what, file) => {
    const s = setup();
    const res = await s.push(wrap(file), await bearer());
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ enqueued: 0, requests: [] });
    expect(s.enqueued).toEqual([]);
  });

  it.each([
    ["another service's audit entry", () => wrap("gce-instance-insert.json"), "NotKubernetesAudit"],
    ["data that is not base64", () => gke("push-data-not-base64.json"), "MalformedDelivery"],
    [
      "data that is not JSON",
      () => JSON.stringify({ message: { messageId: "1", data: btoa("nope") } }),
      "MalformedDelivery",
    ],
    ["a body that is not JSON", () => "{", "InvalidJSON"],
    ["a body that is not a push", () => JSON.stringify({ hello: "world" }), "MalformedDelivery"],
  ])(
    "%s → 200 acknowledged with the reason (a redelivery would be the same bytes)",
    async (_what, body, reason) => {
      const s = setup();
      const res = await s.push(body(), await bearer());
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ enqueued: 0, acknowledged: reason });
      expect(s.enqueued).toEqual([]);
    },
  );

  it("an authenticated delivery over the size cap is acknowledged (TooLarge), not redelivered forever", async () => {
    const s = setup({ maxBodyBytes: 1024 });
    const res = await s.push(wrap("statefulset-update-request-response.json"), await bearer());
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ acknowledged: "TooLarge" });
    expect(s.enqueued).toEqual([]);
  });

  it.each<[string, () => Promise<Record<string, string>>, number, string]>([
    ["no Authorization", async () => ({}), 401, "MissingToken"],
    [
      "the audit webhook's kind of bearer token",
      async () => ({ authorization: "Bearer audit-token-0123456789abcdef" }),
      401,
      "MalformedToken",
    ],
    [
      "a token for another audience",
      () => bearer({ aud: "https://other.example.com" }),
      403,
      "WrongAudience",
    ],
    [
      "a token of another service account",
      () => bearer({ email: "x@evil.iam.gserviceaccount.com" }),
      403,
      "WrongServiceAccount",
    ],
    ["an expired token", () => bearer({ exp: Math.floor(Date.now() / 1000) - 3600 }), 401, "Expired"],
    [
      "a bad relay signature",
      async () => ({
        "x-kubefn-signature": `sha256=${"0".repeat(64)}`,
        "x-kubefn-timestamp": String(Math.floor(Date.now() / 1000)),
      }),
      401,
      "BadSignature",
    ],
  ])("%s → %s, nothing enqueued", async (_what, headers, status, reason) => {
    const s = setup();
    const res = await s.push(gke("push-proxy-create.json"), await headers());
    expect(res.status).toBe(status);
    expect(await res.json()).toMatchObject({ reason });
    expect(s.enqueued).toEqual([]);
  });

  it("unauthenticated garbage is refused (401), not acknowledged", async () => {
    const s = setup();
    const res = await s.push("{", {});
    expect(res.status).toBe(401);
  });

  it("the relay's HMAC signature authenticates a forwarded delivery, once: a replay is 409", async () => {
    const s = setup();
    const body = gke("push-proxy-create.json");
    const headers = await signBatch(RELAY_SECRET, body, Date.now() / 1000);
    const res = await s.push(body, headers);
    expect(res.status).toBe(202);
    expect(s.enqueued).toHaveLength(1);
    const again = await s.push(body, headers);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ reason: "Replayed" });
    expect(s.enqueued).toHaveLength(1);
  });

  it("a signed delivery with a stale timestamp is refused from its headers", async () => {
    const s = setup();
    const body = gke("push-proxy-create.json");
    const res = await s.push(body, await signBatch(RELAY_SECRET, body, Date.now() / 1000 - 3600));
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ reason: "StaleTimestamp" });
    expect(s.enqueued).toEqual([]);
  });

  it("signing keys that cannot be fetched → 503 (Pub/Sub redelivers), nothing enqueued", async () => {
    const s = setup({
      keys: {
        key: async () => {
          throw new KeysUnavailableError("JWKS answered 500");
        },
      },
    });
    const res = await s.push(gke("push-proxy-create.json"), await bearer());
    expect(res.status).toBe(503);
    expect(s.enqueued).toEqual([]);
  });

  it("a queue that fails → 503, so Pub/Sub redelivers", async () => {
    const s = setup({ failEnqueue: true });
    const res = await s.push(gke("push-proxy-create.json"), await bearer());
    expect(res.status).toBe(503);
  });

  it("Pub/Sub intake that is not configured refuses with 401", async () => {
    const { ctx } = fakeContext(new FakeKube());
    const app = createIntakeApp({
      maxBodyBytes: 1024,
      replayWindowSeconds: 300,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: async () => ({ messages: [], counts: {} }),
      enqueue: async () => {
        throw new Error("must not enqueue");
      },
    });
    const res = await app.request("/v1/events/pubsub", {
      method: "POST",
      body: gke("push-proxy-create.json"),
      headers: await bearer(),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ reason: "NotConfigured" });
  });
});
