/**
 * The intake canary (runtime/intake-canary.ts): `kubefn doctor` creates ConfigMap
 * kubefn-system/kubefn-intake-canary-<nonce>, and intake answers its creation, from either source,
 * with an IntakeReceived Event naming the source; nothing else about it is acknowledged.
 */
import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import {
  proxyController,
  siteController,
  subPoolController,
} from "../../../test/unit/runtime/controllers.ts";
import { signBatch } from "../../auth/index.ts";
import { createRegistry } from "../../runtime/index.ts";
import type { Message } from "../../runtime/types.ts";
import { createIntakeApp } from "./app.ts";
import { mapWithRegistry } from "./wire.ts";

const AUDIT_TOKEN = "audit-token-0123456789abcdef";
const RELAY_SECRET = "relay-secret-0123456789abcdef";
const NOW = new Date("2026-11-30T12:00:00Z");
const nowSeconds = NOW.getTime() / 1000;

function setup() {
  const registry = createRegistry([proxyController(), subPoolController(), siteController()]);
  const kube = new FakeKube();
  const { ctx } = fakeContext(kube, { now: NOW });
  const enqueued: Message[] = [];
  const app = createIntakeApp({
    auditToken: AUDIT_TOKEN,
    relaySecret: RELAY_SECRET,
    maxBodyBytes: 64 * 1024,
    replayWindowSeconds: 300,
    clock: ctx.clock,
    log: ctx.log,
    metrics: ctx.metrics,
    map: mapWithRegistry(ctx, registry, ["system:serviceaccount:kubefn-system:kubefn"]),
    enqueue: async (messages) => {
      enqueued.push(...messages);
    },
  });
  return { app, enqueued, kube };
}

const post = (app: ReturnType<typeof setup>["app"], body: string, headers: Record<string, string>) =>
  app.request("/v1/events", {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });

describe("the intake canary (kubefn doctor: does intake receive events?)", () => {
  const canary = "kubefn-intake-canary-0a1b2c3d";
  const auditEvent = (verb: string, username = "admin") => ({
    level: "Metadata",
    stage: "ResponseComplete",
    verb,
    user: { username },
    objectRef: { resource: "configmaps", namespace: "kubefn-system", name: canary, apiVersion: "v1" },
    responseStatus: { code: verb === "create" ? 201 : 200 },
  });
  const auditBody = (...items: unknown[]) =>
    JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items });
  const acks = (kube: FakeKube) =>
    kube.calls.filter((c) => c.method === "create" && c.resource === "events").map((c) => c.body);

  it.each([
    ["audit", "the API server's audit webhook (or an audit log export)"],
    ["relay", "the relay"],
  ] as const)(
    "a canary's creation from the %s is acknowledged with an IntakeReceived Event, and enqueues nothing",
    async (source, from) => {
      const s = setup();
      const relay = JSON.stringify({
        kind: "RelayBatch",
        apiVersion: "kubefn.dev/v1",
        events: [
          {
            type: "ADDED",
            resource: { group: "", version: "v1", resource: "configmaps" },
            object: { metadata: { name: canary, namespace: "kubefn-system", uid: "u1" } },
          },
        ],
      });
      const res =
        source === "audit"
          ? await post(s.app, auditBody(auditEvent("create")), { authorization: `Bearer ${AUDIT_TOKEN}` })
          : await post(s.app, relay, await signBatch(RELAY_SECRET, relay, nowSeconds));
      expect(res.status).toBe(202);
      expect(s.enqueued).toEqual([]);
      expect(acks(s.kube)).toEqual([
        expect.objectContaining({
          reason: "IntakeReceived",
          reportingController: "kubefn.dev/intake",
          note: `kubefn's intake received the creation of ${canary} from ${from}`,
          regarding: expect.objectContaining({ kind: "ConfigMap", namespace: "kubefn-system", name: canary }),
        }),
      ]);
    },
  );

  it("ignores the canary's deletion, kubefn's own writes, and ConfigMaps elsewhere or named otherwise", async () => {
    const s = setup();
    const elsewhere = {
      ...auditEvent("create"),
      objectRef: { ...auditEvent("create").objectRef, namespace: "default" },
    };
    const bare = {
      ...auditEvent("create"),
      objectRef: { ...auditEvent("create").objectRef, name: "kubefn-intake-canary-" },
    };
    const res = await post(
      s.app,
      auditBody(
        auditEvent("delete"),
        auditEvent("create", "system:serviceaccount:kubefn-system:kubefn"),
        elsewhere,
        bare,
      ),
      { authorization: `Bearer ${AUDIT_TOKEN}` },
    );
    expect(res.status).toBe(202);
    expect(acks(s.kube)).toEqual([]);
  });
});
