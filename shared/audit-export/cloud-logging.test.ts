import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { createOperators } from "../app/operators.ts";
import { proxyResource } from "../controllers/proxy/api.ts";
import { mapEvents } from "../runtime/index.ts";
import {
  auditEventFromLogEntry,
  logEntryFromAuditEvent,
  PushDeliveryError,
  parsePushDelivery,
} from "./index.ts";

const gke = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/gke/${name}`, import.meta.url), "utf8"));
const audit = (name: string): Record<string, unknown> =>
  JSON.parse(
    readFileSync(new URL(`../../test/fixtures/audit/devcluster-${name}.json`, import.meta.url), "utf8"),
  ).items[0];

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const NS = "audit-fixtures";
const operators = createOperators({
  prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
  sweepPeriodSeconds: 60,
});

function world() {
  const kube = new FakeKube();
  kube.seed(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: NS, name: "p1", uid: "uid-p1" },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "ci" } } },
  });
  return fakeContext(kube).ctx;
}

async function mapEntries(...entries: unknown[]) {
  const items = entries.map((e) => {
    const r = auditEventFromLogEntry(e);
    return "event" in r ? r.event : r.skip;
  });
  return mapEvents(
    world(),
    operators.registry,
    { kind: "EventList", apiVersion: "audit.k8s.io/v1", items },
    {
      selfUsernames: [SELF],
    },
  );
}

const p1 = { controller: "proxy", namespace: NS, name: "p1" };

describe("GKE audit LogEntry → audit Event", () => {
  it.each([
    [
      "pod-create-request-response.json",
      {
        verb: "create",
        objectRef: { apiGroup: "", apiVersion: "v1", resource: "pods", namespace: NS, name: "owned" },
      },
    ],
    [
      "proxy-create-metadata.json",
      {
        verb: "create",
        level: "Metadata",
        objectRef: {
          apiGroup: "crawl.kubefn.dev",
          apiVersion: "v1alpha1",
          resource: "proxies",
          namespace: NS,
          name: "p1",
        },
      },
    ],
    [
      "proxy-status-patch.json",
      { verb: "patch", objectRef: { resource: "proxies", namespace: NS, name: "p1", subresource: "status" } },
    ],
    ["proxy-create-conflict.json", { verb: "create", responseStatus: { code: 500 } }],
    [
      "secret-update-metadata.json",
      { verb: "update", objectRef: { resource: "secrets", name: "ci", apiGroup: "" } },
    ],
    [
      "subpool-delete-metadata.json",
      {
        verb: "delete",
        objectRef: { apiGroup: "subrelay.example.com", resource: "subpools", name: "team-a" },
      },
    ],
    [
      "namespace-finalize.json",
      {
        verb: "update",
        objectRef: { resource: "namespaces", name: "subpool-team-a", subresource: "finalize" },
      },
    ],
    ["self-write.json", { user: { username: SELF } }],
    [
      "statefulset-update-request-response.json",
      {
        verb: "update",
        level: "RequestResponse",
        objectRef: { apiGroup: "apps", resource: "statefulsets", namespace: "subpool-team-a", name: "relay" },
      },
    ],
  ])("%s", (name, expected) => {
    const reading = auditEventFromLogEntry(gke(name));
    expect(reading).toHaveProperty("event");
    const event = (reading as { event: Record<string, unknown> }).event;
    expect(event).toMatchObject({ stage: "ResponseComplete", ...expected });
    if (name === "subpool-delete-metadata.json") expect(event.objectRef).not.toHaveProperty("namespace");
  });

  it("a collection (deletecollection, a generateName create) has no name in its objectRef", () => {
    const reading = auditEventFromLogEntry({
      protoPayload: {
        serviceName: "k8s.io",
        methodName: "io.k8s.core.v1.configmaps.deletecollection",
        resourceName: "core/v1/namespaces/subpool-team-a/configmaps",
        status: { code: 0 },
      },
    });
    expect(reading).toMatchObject({
      event: {
        verb: "deletecollection",
        responseStatus: { code: 200 },
        objectRef: { resource: "configmaps", namespace: "subpool-team-a" },
      },
    });
    expect((reading as { event: { objectRef: object } }).event.objectRef).not.toHaveProperty("name");
  });

  it("keeps the bodies without their @type (a RequestResponse entry)", () => {
    const { event } = auditEventFromLogEntry(gke("pod-create-request-response.json")) as {
      event: Record<string, unknown>;
    };
    expect(event.requestObject).toMatchObject({ kind: "Pod", metadata: { name: "owned" } });
    expect(event.requestObject).not.toHaveProperty("@type");
    expect(event.responseObject).not.toHaveProperty("@type");
  });

  it.each([
    ["another service's audit entry", gke("gce-instance-insert.json"), /compute.googleapis.com/],
    ["not an object", "text", /not a JSON object/],
    ["no protoPayload", { textPayload: "x" }, /no protoPayload/],
    [
      "a method that does not match the resource",
      {
        protoPayload: {
          serviceName: "k8s.io",
          methodName: "io.k8s.core.v1.pods.create",
          resourceName: "core/v1/namespaces/ns/secrets/s",
        },
      },
      /does not match/,
    ],
    [
      "a resourceName without a version",
      {
        protoPayload: {
          serviceName: "k8s.io",
          methodName: "io.k8s.core.v1.pods.create",
          resourceName: "pods",
        },
      },
      /not <group>\/<version>/,
    ],
  ])("%s is skipped with the reason", (_what, entry, reason) => {
    const reading = auditEventFromLogEntry(entry);
    expect(reading).toEqual({ skip: expect.stringMatching(reason) });
  });

  it("maps through the registry like the webhook's events: CR at Metadata level → itself; Secret → the Proxies naming it; owned StatefulSet → its SubPool; a Pod nobody owns → nothing", async () => {
    const { requests, counts } = await mapEntries(
      gke("proxy-create-metadata.json"),
      gke("secret-update-metadata.json"),
      gke("statefulset-update-request-response.json"),
      gke("subpool-delete-metadata.json"),
      gke("pod-create-request-response.json"),
    );
    expect(requests).toEqual([p1, { controller: "subpool", name: "team-a" }]);
    expect(counts).toMatchObject({ events: 5, mapped: 4, ignored: 1, requests: 2 });
  });

  it("drops status writes, failures, self-writes and finalize, as the webhook's", async () => {
    const { requests, counts } = await mapEntries(
      gke("proxy-status-patch.json"),
      gke("proxy-create-conflict.json"),
      gke("self-write.json"),
      gke("namespace-finalize.json"),
    );
    expect(requests).toEqual([]);
    expect(counts).toMatchObject({ events: 4, dropped: 4 });
  });

  it.each([
    "proxy-create",
    "proxy-status-patch",
    "secret-create",
    "pod-owned-create",
    "proxy-create-conflict",
    "self-write",
    "proxy-delete",
  ])("devcluster %s, written as GKE logs it, maps to the webhook's requests", async (name) => {
    const event = audit(name);
    const viaWebhook = await mapEvents(
      world(),
      operators.registry,
      { kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [event] },
      { selfUsernames: [SELF] },
    );
    const isCustom = (event.objectRef as { apiGroup?: string }).apiGroup !== undefined;
    const entry = logEntryFromAuditEvent(event, { cluster: "prod", project: "p", metadataOnly: isCustom });
    const viaGke = await mapEntries(entry);
    expect(viaGke.requests).toEqual(viaWebhook.requests);
  });
});

describe("Pub/Sub push envelope", () => {
  it("decodes the documented wrapper", () => {
    const delivery = parsePushDelivery(gke("push-proxy-create.json"));
    expect(delivery.messageId).toBe("13697034826148791");
    expect(JSON.parse(delivery.data)).toEqual(gke("proxy-create-metadata.json"));
  });

  it.each([
    ["data that is not base64", gke("push-data-not-base64.json")],
    ["no message", { subscription: "s" }],
    ["no messageId", { message: { data: "e30=" } }],
    ["no data", { message: { messageId: "1" } }],
  ])("%s → PushDeliveryError", (_what, body) => {
    expect(() => parsePushDelivery(body)).toThrow(PushDeliveryError);
  });
});
