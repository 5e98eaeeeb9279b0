/**
 * The intake canary (runtime/intake/intake-canary.ts): `kubefn doctor` creates ConfigMap
 * kubefn-system/kubefn-intake-canary-<nonce>, and intake answers its creation, from either source,
 * with an IntakeReceived Event naming the source; nothing else about it is acknowledged.
 */
import { describe, expect, it } from "vitest";
import type { FakeKube } from "../../../test/support/fake-kube.ts";
import { AUDIT_TOKEN, intakeUnderTest, postEvents, RELAY_SECRET } from "../../../test/support/intake-app.ts";
import { signBatch } from "../../auth/index.ts";

const NOW = new Date("2026-11-30T12:00:00Z");
const nowSeconds = NOW.getTime() / 1000;

function setup() {
  return intakeUnderTest(NOW);
}

const post = postEvents;

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
