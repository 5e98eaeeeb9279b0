import { describe, expect, it } from "vitest";
import { countingTransport } from "./counting-transport.ts";
import { ConflictError, NetworkError, NotFoundError } from "./errors.ts";
import { createKube } from "./kube.ts";
import { listAll } from "./list.ts";
import type { Kube, Resource, Transport, TransportRequest, TransportResponse } from "./port.ts";
import { Resources } from "./resources.ts";

const proxies: Resource = {
  group: "kubefn.dev",
  version: "v1alpha1",
  resource: "proxies",
  kind: "Proxy",
  namespaced: true,
};
const cm = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "a", namespace: "ns", resourceVersion: "7" },
};

/** A transport that records requests and answers from a queue (200 {} by default). */
function fakeTransport(answers: Array<Partial<TransportResponse> | Error> = []) {
  const seen: TransportRequest[] = [];
  const transport: Transport = {
    async request(req) {
      seen.push(req);
      const answer = answers.shift() ?? {};
      if (answer instanceof Error) throw answer;
      return { status: 200, headers: new Headers(), body: "{}", ...answer };
    },
  };
  return { transport, seen };
}

type Call = (kube: Kube) => Promise<unknown>;

describe("createKube requests", () => {
  it.each<{ name: string; call: Call; method: string; path: string; contentType?: string; body?: unknown }>([
    {
      name: "get",
      call: (k) => k.get(Resources.ConfigMap, { namespace: "ns", name: "a" }),
      method: "GET",
      path: "/api/v1/namespaces/ns/configmaps/a",
    },
    {
      name: "list with selectors",
      call: (k) =>
        k.list(proxies, {
          namespace: "edge",
          labelSelector: "a=b",
          fieldSelector: "metadata.name=x",
          limit: 2,
          continue: "tok",
        }),
      method: "GET",
      path: "/apis/kubefn.dev/v1alpha1/namespaces/edge/proxies?labelSelector=a%3Db&fieldSelector=metadata.name%3Dx&limit=2&continue=tok",
    },
    {
      name: "create",
      call: (k) => k.create(Resources.ConfigMap, cm),
      method: "POST",
      path: "/api/v1/namespaces/ns/configmaps?fieldManager=kubefn",
      contentType: "application/json",
      body: cm,
    },
    {
      name: "create fills apiVersion/kind",
      call: (k) =>
        k.create(Resources.Namespace, { metadata: { name: "t" } } as never, {
          dryRun: true,
          fieldManager: "me",
        }),
      method: "POST",
      path: "/api/v1/namespaces?fieldManager=me&dryRun=All",
      contentType: "application/json",
      body: { metadata: { name: "t" }, apiVersion: "v1", kind: "Namespace" },
    },
    {
      name: "update",
      call: (k) => k.update(Resources.ConfigMap, cm),
      method: "PUT",
      path: "/api/v1/namespaces/ns/configmaps/a?fieldManager=kubefn",
      contentType: "application/json",
      body: cm,
    },
    {
      name: "updateStatus",
      call: (k) => k.updateStatus(proxies, { ...cm, apiVersion: "kubefn.dev/v1alpha1", kind: "Proxy" }),
      method: "PUT",
      path: "/apis/kubefn.dev/v1alpha1/namespaces/ns/proxies/a/status?fieldManager=kubefn",
      contentType: "application/json",
    },
    {
      name: "merge patch",
      call: (k) =>
        k.patch(
          Resources.ConfigMap,
          { namespace: "ns", name: "a" },
          { type: "merge", body: { data: { k: "v" } } },
        ),
      method: "PATCH",
      path: "/api/v1/namespaces/ns/configmaps/a?fieldManager=kubefn",
      contentType: "application/merge-patch+json",
      body: { data: { k: "v" } },
    },
    {
      name: "json patch on status",
      call: (k) =>
        k.patchStatus(
          proxies,
          { namespace: "ns", name: "a" },
          { type: "json", ops: [{ op: "test", path: "/x", value: 1 }] },
        ),
      method: "PATCH",
      path: "/apis/kubefn.dev/v1alpha1/namespaces/ns/proxies/a/status?fieldManager=kubefn",
      contentType: "application/json-patch+json",
      body: [{ op: "test", path: "/x", value: 1 }],
    },
    {
      name: "apply with force",
      call: (k) =>
        k.patch(
          Resources.ConfigMap,
          { namespace: "ns", name: "a" },
          { type: "apply", body: cm, fieldManager: "site", force: true },
        ),
      method: "PATCH",
      path: "/api/v1/namespaces/ns/configmaps/a?fieldManager=site&force=true",
      contentType: "application/apply-patch+yaml",
      body: cm,
    },
    {
      name: "apply without force",
      call: (k) =>
        k.patch(
          Resources.ConfigMap,
          { namespace: "ns", name: "a" },
          { type: "apply", body: cm, fieldManager: "site" },
        ),
      method: "PATCH",
      path: "/api/v1/namespaces/ns/configmaps/a?fieldManager=site",
      contentType: "application/apply-patch+yaml",
    },
    {
      name: "delete with options",
      call: (k) =>
        k.delete(
          Resources.Namespace,
          { name: "t" },
          { preconditions: { uid: "u1" }, propagationPolicy: "Foreground", gracePeriodSeconds: 0 },
        ),
      method: "DELETE",
      path: "/api/v1/namespaces/t",
      contentType: "application/json",
      body: {
        kind: "DeleteOptions",
        apiVersion: "v1",
        preconditions: { uid: "u1" },
        propagationPolicy: "Foreground",
        gracePeriodSeconds: 0,
      },
    },
  ])("$name", async ({ call, method, path, contentType, body }) => {
    const { transport, seen } = fakeTransport();
    await call(createKube(transport));
    expect(seen).toHaveLength(1);
    const req = seen[0]!;
    expect(req.method).toBe(method);
    expect(req.path).toBe(path);
    expect(req.contentType).toBe(contentType);
    if (body !== undefined) expect(JSON.parse(req.body!)).toEqual(body);
  });
});

describe("createKube answers", () => {
  it("decodes a failed answer into a typed error", async () => {
    const { transport } = fakeTransport([
      {
        status: 404,
        body: '{"kind":"Status","status":"Failure","reason":"NotFound","message":"x not found","code":404}',
      },
    ]);
    await expect(
      createKube(transport).get(Resources.ConfigMap, { namespace: "ns", name: "x" }),
    ).rejects.toBeInstanceOf(NotFoundError);
  });

  it("wraps a transport throw into a NetworkError", async () => {
    const { transport } = fakeTransport([new TypeError("fetch failed")]);
    const err = await createKube(transport)
      .get(Resources.ConfigMap, { namespace: "ns", name: "x" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).cause).toBeInstanceOf(TypeError);
  });

  it("passes a transport's own KubeError through", async () => {
    const conflict = new ConflictError("c", { status: 409, reason: "Conflict" });
    const { transport } = fakeTransport([conflict]);
    await expect(createKube(transport).update(Resources.ConfigMap, cm)).rejects.toBe(conflict);
  });

  it("fills apiVersion/kind of list items and normalises an empty continue", async () => {
    const { transport } = fakeTransport([
      {
        body: JSON.stringify({
          metadata: { resourceVersion: "42", continue: "" },
          items: [{ metadata: { name: "a" } }],
        }),
      },
    ]);
    const page = await createKube(transport).list(Resources.ConfigMap);
    expect(page).toEqual({
      resourceVersion: "42",
      items: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" } }],
    });
  });

  it("listAll follows continue", async () => {
    const page = (names: string[], cont?: string) => ({
      body: JSON.stringify({
        metadata: { resourceVersion: "1", continue: cont },
        items: names.map((name) => ({ metadata: { name } })),
      }),
    });
    const { transport, seen } = fakeTransport([page(["a", "b"], "t1"), page(["c", "d"], "t2"), page(["e"])]);
    const counting = countingTransport(transport);
    const items = await listAll(createKube(counting), Resources.ConfigMap, {
      namespace: "ns",
      limit: 2,
      labelSelector: "x=y",
    });
    expect(items.map((i) => i.metadata.name)).toEqual(["a", "b", "c", "d", "e"]);
    expect(seen.map((r) => new URL(r.path, "http://x").searchParams.get("continue"))).toEqual([
      null,
      "t1",
      "t2",
    ]);
    expect(seen.every((r) => r.path.includes("labelSelector=x%3Dy") && r.path.includes("limit=2"))).toBe(
      true,
    );
    expect(counting.counts()).toEqual({ reads: 3, writes: 0 });
  });
});

describe("countingTransport", () => {
  it("counts reads and writes, records statuses, resets", async () => {
    const { transport } = fakeTransport([{}, { status: 409, body: "" }, new Error("down")]);
    const counting = countingTransport(transport);
    const kube = createKube(counting);
    await kube.get(Resources.ConfigMap, { namespace: "ns", name: "a" });
    await kube.update(Resources.ConfigMap, cm).catch(() => undefined);
    await kube.delete(Resources.ConfigMap, { namespace: "ns", name: "a" }).catch(() => undefined);
    expect(counting.counts()).toEqual({ reads: 1, writes: 2 });
    expect(counting.calls().map((c) => [c.method, c.status])).toEqual([
      ["GET", 200],
      ["PUT", 409],
      ["DELETE", 0],
    ]);
    counting.reset();
    expect(counting.counts()).toEqual({ reads: 0, writes: 0 });
  });
});
