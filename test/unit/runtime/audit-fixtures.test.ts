/**
 * Real audit events, captured from the devcluster's API server (test/fixtures/capture-audit.ts),
 * through `mapEvents` with the registry the platforms really run (`createOperators`).
 *
 * How they differ from the hand-written test/fixtures/audit/mixed.json: neither carries a
 * per-item `kind`/`apiVersion` (the webhook's EventList items have none); the real Proxy events
 * are at `Metadata` level (infra/audit/policy.yaml), so unlike mixed.json they have no
 * requestObject/responseObject and map from `objectRef` alone; the real admin is `admin`, not
 * `kubernetes-admin`, and the group is crawl.kubefn.dev (mixed.json uses crawl.example.com); a
 * real failure's responseStatus is a full Status (status, reason, message, details), not just a
 * code.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createOperators } from "../../../shared/app/operators.ts";
import { proxyResource } from "../../../shared/controllers/proxy/api.ts";
import { mapEvents } from "../../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const NS = "audit-fixtures";

interface EventList {
  kind: string;
  apiVersion: string;
  items: Array<Record<string, unknown>>;
}

const load = (what: string): EventList =>
  JSON.parse(
    readFileSync(new URL(`../../fixtures/audit/devcluster-${what}.json`, import.meta.url), "utf8"),
  ) as EventList;

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
  kube.seed(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: NS, name: "other", uid: "uid-other" },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config\n" } },
  });
  return fakeContext(kube);
}

const map = (what: string) =>
  mapEvents(world().ctx, operators.registry, load(what), { selfUsernames: [SELF] });

const p1 = { controller: "proxy", namespace: NS, name: "p1" };

describe("audit events captured from the devcluster", () => {
  it("are EventLists of ResponseComplete items without per-item kind/apiVersion", () => {
    for (const what of [
      "proxy-create",
      "proxy-status-patch",
      "secret-create",
      "pod-owned-create",
      "proxy-create-conflict",
      "self-write",
      "proxy-delete",
    ]) {
      const list = load(what);
      expect(list).toMatchObject({ kind: "EventList", apiVersion: "audit.k8s.io/v1" });
      expect(list.items).toHaveLength(1);
      const [item] = list.items;
      expect(item).toMatchObject({ stage: "ResponseComplete" });
      expect(item).not.toHaveProperty("kind");
      expect(item).not.toHaveProperty("apiVersion");
      expect(typeof item!.auditID).toBe("string");
      expect(typeof item!.stageTimestamp).toBe("string");
    }
  });

  it("an admin's create of a Proxy (kubectl apply, Metadata level, no body) → a request for it", async () => {
    const list = load("proxy-create");
    expect(list.items[0]).toMatchObject({ level: "Metadata", verb: "create", user: { username: "admin" } });
    expect(list.items[0]).not.toHaveProperty("responseObject");
    expect(String(list.items[0]!.userAgent)).toMatch(/^kubectl\//);
    const r = await map("proxy-create");
    expect(r.source).toBe("audit");
    expect(r.requests).toEqual([p1]);
    expect(r.counts).toMatchObject({ events: 1, mapped: 1, requests: 1 });
  });

  it("a status-subresource patch → dropped", async () => {
    const r = await map("proxy-status-patch");
    expect(r.requests).toEqual([]);
    expect(r.counts).toMatchObject({ events: 1, dropped: 1 });
  });

  it("the functions' own write (the kubefn ServiceAccount) → dropped", async () => {
    expect(load("self-write").items[0]).toMatchObject({ user: { username: SELF }, verb: "patch" });
    const r = await map("self-write");
    expect(r.requests).toEqual([]);
    expect(r.counts).toMatchObject({ events: 1, dropped: 1 });
    // The same event from anyone else would be a request.
    const other = await mapEvents(world().ctx, operators.registry, load("self-write"));
    expect(other.requests).toEqual([p1]);
  });

  it("a failed write (409 AlreadyExists) → dropped", async () => {
    expect(load("proxy-create-conflict").items[0]).toMatchObject({
      responseStatus: { code: 409, reason: "AlreadyExists", status: "Failure" },
    });
    const r = await map("proxy-create-conflict");
    expect(r.requests).toEqual([]);
    expect(r.counts).toMatchObject({ events: 1, dropped: 1 });
  });

  it("a delete → a request for the Proxy (its pass runs the absent/finalizer path)", async () => {
    const r = await map("proxy-delete");
    expect(r.requests).toEqual([p1]);
    expect(r.counts).toMatchObject({ events: 1, mapped: 1 });
  });

  it("a Pod whose controlling ownerReference is a Proxy → nothing: the proxy controller owns no Pods", async () => {
    const item = load("pod-owned-create").items[0] as {
      level: string;
      responseObject: { metadata: { ownerReferences: unknown[] } };
    };
    expect(item.level).toBe("RequestResponse");
    expect(item.responseObject.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        name: "p1",
        controller: true,
      }),
    ]);
    expect(operators.registry.ownersOf("", "pods")).toEqual([]);
    const r = await map("pod-owned-create");
    expect(r.requests).toEqual([]);
    expect(r.counts).toMatchObject({ events: 1, ignored: 1 });
  });

  it("a Secret create (Metadata level, no body) → the Proxies whose cloudInit.secretRef names it", async () => {
    const item = load("secret-create").items[0]!;
    expect(item).toMatchObject({ level: "Metadata", objectRef: { resource: "secrets", name: "ci" } });
    expect(item).not.toHaveProperty("requestObject");
    const { ctx } = world();
    const r = await mapEvents(ctx, operators.registry, load("secret-create"), { selfUsernames: [SELF] });
    expect(r.requests).toEqual([p1]);
    expect(r.counts).toMatchObject({ events: 1, mapped: 1, mapperErrors: 0, requests: 1 });
  });

  it("all seven in one batch → p1 once (create and delete deduplicated)", async () => {
    const all = [
      "proxy-create",
      "proxy-status-patch",
      "secret-create",
      "pod-owned-create",
      "proxy-create-conflict",
      "self-write",
      "proxy-delete",
    ].flatMap((w) => load(w).items);
    const r = await mapEvents(
      world().ctx,
      operators.registry,
      { kind: "EventList", apiVersion: "audit.k8s.io/v1", metadata: {}, items: all },
      { selfUsernames: [SELF] },
    );
    expect(r.requests).toEqual([p1]);
    expect(r.counts).toMatchObject({ events: 7, dropped: 3, ignored: 1, mapped: 3, skipped: 0, requests: 1 });
  });
});
