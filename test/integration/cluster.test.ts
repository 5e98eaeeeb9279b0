/**
 * The development cluster (infra/devcluster) is a real control plane: each test here exercises
 * behaviour a fake API server would not have (schema and CEL validation, status subresource
 * semantics, finalizers, namespace and garbage-collector controllers, TokenRequest and RBAC,
 * optimistic concurrency, audit webhook delivery, a simulated node whose Pods get loopback IPs).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import {
  auditEventsSince,
  clusterInfo,
  eventually,
  kubeConfig,
  kubectl,
  waitForAuditEvent,
} from "../setup/cluster.ts";

const suffix = Math.random().toString(36).slice(2, 8);
let counter = 0;
const unique = (prefix: string) => `${prefix}-${suffix}-${++counter}`;

interface ApiResponse {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test-side JSON
  body: any;
}

/** A request through the devcluster's plain-HTTP proxy, as the admin unless `token` is given. */
async function api(
  method: string,
  path: string,
  body?: unknown,
  opts: { token?: string | null; contentType?: string } = {},
): Promise<ApiResponse> {
  const { httpProxy, adminToken } = clusterInfo();
  const headers: Record<string, string> = { accept: "application/json" };
  const token = opts.token === undefined ? adminToken : opts.token;
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = opts.contentType ?? "application/json";
  const res = await fetch(`${httpProxy}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed };
}

async function createNamespace(name: string): Promise<void> {
  const r = await api("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

async function waitGone(path: string, timeoutMs = 60_000): Promise<void> {
  await eventually(async () => ((await api("GET", path)).status === 404 ? true : undefined), {
    timeoutMs,
    intervalMs: 200,
    what: `${path} to be gone`,
  });
}

// ---------------------------------------------------------------------------------------------
// CRDs: schema, CEL, status subresource, finalizers
// ---------------------------------------------------------------------------------------------

const group = `t${suffix}.test.kubefn.dev`;
const crdName = `widgets.${group}`;
const widgets = `/apis/${group}/v1/namespaces/default/widgets`;
const crdYaml = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${crdName}
spec:
  group: ${group}
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: { type: integer, minimum: 1, maximum: 10 }
                owner:
                  type: string
                  x-kubernetes-validations:
                    - rule: "self == oldSelf"
                      message: owner is immutable
            status:
              type: object
              properties:
                phase: { type: string }
`;

async function ensureCrd(): Promise<void> {
  const r = await kubectl(["apply", "-f", "-"], crdYaml);
  expect(r.code, r.stderr).toBe(0);
  await eventually(
    async () => {
      const crd = await api("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
      const established = crd.body?.status?.conditions?.find(
        (c: { type: string; status: string }) => c.type === "Established" && c.status === "True",
      );
      if (!established) return undefined;
      // The new API is served once discovery has it.
      return (await api("GET", widgets)).status === 200 ? true : undefined;
    },
    { what: "CRD established and served" },
  );
}

afterAll(async () => {
  // The CRD goes, and with it every Widget left (none holds a finalizer by now).
  const crd = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`;
  if ((await api("DELETE", crd)).status !== 404) await waitGone(crd);
});

const widget = (name: string, spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  apiVersion: `${group}/v1`,
  kind: "Widget",
  metadata: { name, ...extra },
  spec,
});

describe("devcluster", () => {
  it("applies a CRD; validates custom objects by schema and CEL", async () => {
    await ensureCrd();
    const name = unique("w");
    const created = await api("POST", widgets, widget(name, { size: 3, owner: "alice" }));
    expect(created.status, JSON.stringify(created.body)).toBe(201);

    const invalid = await api("POST", widgets, widget(unique("bad"), { size: 100 }));
    expect(invalid.status).toBe(422);
    expect(invalid.body.message).toContain("spec.size");

    const cel = await api(
      "PATCH",
      `${widgets}/${name}`,
      { spec: { owner: "mallory" } },
      {
        contentType: "application/merge-patch+json",
      },
    );
    expect(cel.status).toBe(422);
    expect(cel.body.message).toContain("owner is immutable");

    // Server-side apply works on custom objects too.
    const applied = await api(
      "PATCH",
      `${widgets}/${name}?fieldManager=cluster-test&force=true`,
      widget(name, { size: 4, owner: "alice" }),
      { contentType: "application/apply-patch+yaml" },
    );
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    expect(applied.body.spec.size).toBe(4);
    expect(
      applied.body.metadata.managedFields.some((m: { manager: string }) => m.manager === "cluster-test"),
    ).toBe(true);
  });

  it("a status write does not bump metadata.generation; a spec write does", async () => {
    await ensureCrd();
    const name = unique("gen");
    const created = await api("POST", widgets, widget(name, { size: 1 }));
    expect(created.status).toBe(201);
    const gen0 = created.body.metadata.generation as number;

    const status = await api(
      "PATCH",
      `${widgets}/${name}/status`,
      { status: { phase: "Ready" } },
      {
        contentType: "application/merge-patch+json",
      },
    );
    expect(status.status).toBe(200);
    expect(status.body.status.phase).toBe("Ready");
    expect(status.body.metadata.generation).toBe(gen0);

    // Through the main resource, status is ignored (and so is the generation).
    const ignored = await api(
      "PATCH",
      `${widgets}/${name}`,
      { status: { phase: "Other" } },
      {
        contentType: "application/merge-patch+json",
      },
    );
    expect(ignored.body.status.phase).toBe("Ready");

    const spec = await api(
      "PATCH",
      `${widgets}/${name}`,
      { spec: { size: 2 } },
      {
        contentType: "application/merge-patch+json",
      },
    );
    expect(spec.status).toBe(200);
    expect(spec.body.metadata.generation).toBe(gen0 + 1);
  });

  it("an object with a finalizer stays (deletionTimestamp set) until the finalizer is removed", async () => {
    await ensureCrd();
    const name = unique("fin");
    const path = `${widgets}/${name}`;
    expect(
      (await api("POST", widgets, widget(name, { size: 1 }, { finalizers: ["test.kubefn.dev/hold"] })))
        .status,
    ).toBe(201);
    const del = await api("DELETE", path);
    expect(del.status).toBe(200);

    const held = await api("GET", path);
    expect(held.status).toBe(200);
    expect(held.body.metadata.deletionTimestamp).toBeTruthy();
    expect(held.body.metadata.finalizers).toEqual(["test.kubefn.dev/hold"]);

    const released = await api(
      "PATCH",
      path,
      { metadata: { finalizers: null } },
      {
        contentType: "application/merge-patch+json",
      },
    );
    expect(released.status).toBe(200);
    await waitGone(path, 10_000);
  });

  // -------------------------------------------------------------------------------------------
  // Controllers: namespace lifecycle and garbage collection
  // -------------------------------------------------------------------------------------------

  it("deleting a Namespace removes it and everything in it", async () => {
    const ns = unique("ns");
    await createNamespace(ns);
    const cm = await api("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: "content" },
      data: { a: "1" },
    });
    expect(cm.status).toBe(201);
    // The serviceaccount controller fills the namespace with its default ServiceAccount.
    await eventually(
      async () =>
        (await api("GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200 ? 1 : undefined,
      { what: "default ServiceAccount" },
    );

    expect((await api("DELETE", `/api/v1/namespaces/${ns}`)).status).toBe(200);
    await waitGone(`/api/v1/namespaces/${ns}`);
    expect((await api("GET", `/api/v1/namespaces/${ns}/configmaps/content`)).status).toBe(404);
  });

  it("the garbage collector cascades deletes to dependents (background and foreground)", async () => {
    const ns = unique("gc");
    await createNamespace(ns);
    const base = `/api/v1/namespaces/${ns}/configmaps`;
    for (const policy of ["Background", "Foreground"] as const) {
      const owner = await api("POST", base, { metadata: { name: `owner-${policy.toLowerCase()}` } });
      expect(owner.status).toBe(201);
      const ownerRef = {
        apiVersion: "v1",
        kind: "ConfigMap",
        name: owner.body.metadata.name,
        uid: owner.body.metadata.uid,
        blockOwnerDeletion: true,
      };
      const dependent = await api("POST", base, {
        metadata: { name: `dependent-${policy.toLowerCase()}`, ownerReferences: [ownerRef] },
      });
      expect(dependent.status).toBe(201);

      const del = await api("DELETE", `${base}/${ownerRef.name}`, {
        apiVersion: "v1",
        kind: "DeleteOptions",
        propagationPolicy: policy,
      });
      expect(del.status).toBe(200);
      if (policy === "Foreground") {
        // The owner waits, with the foregroundDeletion finalizer, for its dependents to go.
        expect(del.body.metadata.finalizers).toContain("foregroundDeletion");
      }
      await waitGone(`${base}/${dependent.body.metadata.name}`);
      await waitGone(`${base}/${ownerRef.name}`);
    }
    await api("DELETE", `/api/v1/namespaces/${ns}`);
  });

  it("the garbage collector follows owners of a just-installed custom resource type within seconds", async () => {
    await ensureCrd();
    const owner = await api("POST", widgets, widget(unique("owner"), { size: 1 }));
    expect(owner.status).toBe(201);
    const name = unique("owned");
    const dependent = await api("POST", "/api/v1/namespaces/default/configmaps", {
      metadata: {
        name,
        ownerReferences: [
          {
            apiVersion: `${group}/v1`,
            kind: "Widget",
            name: owner.body.metadata.name,
            uid: owner.body.metadata.uid,
          },
        ],
      },
    });
    expect(dependent.status).toBe(201);
    expect((await api("DELETE", `${widgets}/${owner.body.metadata.name}`)).status).toBe(200);
    // kube-controller-manager rediscovers resource types every 30s; the devcluster's collector every 2s.
    await waitGone(`/api/v1/namespaces/default/configmaps/${name}`, 10_000);
  });

  // -------------------------------------------------------------------------------------------
  // The simulated node
  // -------------------------------------------------------------------------------------------

  it("a Pod reaches Running with its own loopback IP, where a real server answers", async () => {
    const core = kubeConfig().makeApiClient(CoreV1Api);
    const name = unique("pod");
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name },
        spec: { containers: [{ name: "main", image: "example.invalid/server:1" }] },
      },
    });
    const pod = await eventually<V1Pod>(
      async () => {
        const p = await core.readNamespacedPod({ namespace: "default", name });
        return p.status?.phase === "Running" && p.status.podIP ? p : undefined;
      },
      { what: "pod Running" },
    );
    expect(pod.spec?.nodeName).toBe("devnode");
    const ip = pod.status!.podIP!;
    expect(ip).toMatch(/^127\.\d+\.\d+\.\d+$/);
    expect(ip).not.toBe("127.0.0.1");
    expect(pod.status?.podIPs?.map((p) => p.ip)).toEqual([ip]);
    const conditions = Object.fromEntries((pod.status?.conditions ?? []).map((c) => [c.type, c.status]));
    expect(conditions.Ready).toBe("True");
    expect(conditions.ContainersReady).toBe("True");
    expect(pod.status?.containerStatuses?.[0]?.state?.running).toBeTruthy();

    // A test can serve "as the pod": bind a real server at the pod's address.
    const server = createServer((_req, res) => res.end(`hello from ${name}`));
    await new Promise<void>((resolve) => server.listen(0, ip, resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://${ip}:${port}/`);
      expect(await res.text()).toBe(`hello from ${name}`);
    } finally {
      server.close();
    }

    // Deleting completes, as a kubelet would complete it.
    await core.deleteNamespacedPod({ namespace: "default", name });
    await waitGone(`/api/v1/namespaces/default/pods/${name}`, 30_000);
  });

  it("gives every Pod a different loopback IP", async () => {
    const core = kubeConfig().makeApiClient(CoreV1Api);
    const names = [unique("ip"), unique("ip"), unique("ip")];
    await Promise.all(
      names.map((name) =>
        core.createNamespacedPod({
          namespace: "default",
          body: { metadata: { name }, spec: { containers: [{ name: "c", image: "x" }] } },
        }),
      ),
    );
    const ips = await Promise.all(
      names.map((name) =>
        eventually(async () => (await core.readNamespacedPod({ namespace: "default", name })).status?.podIP, {
          what: `${name} IP`,
        }),
      ),
    );
    expect(new Set(ips).size).toBe(3);
    await Promise.all(
      names.map((name) => core.deleteNamespacedPod({ namespace: "default", name, gracePeriodSeconds: 0 })),
    );
  });

  // -------------------------------------------------------------------------------------------
  // Audit webhook
  // -------------------------------------------------------------------------------------------

  it("delivers audit EventLists: a ConfigMap create arrives; Secrets only at Metadata level", async () => {
    const { next } = await auditEventsSince();
    const cmName = unique("audited");
    const secretName = unique("secret");
    const saName = unique("sa");
    expect(
      (await api("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: cmName } })).status,
    ).toBe(201);
    expect(
      (
        await api("POST", "/api/v1/namespaces/default/secrets", {
          metadata: { name: secretName },
          stringData: { password: "hunter2" },
        })
      ).status,
    ).toBe(201);
    expect(
      (await api("POST", "/api/v1/namespaces/default/serviceaccounts", { metadata: { name: saName } }))
        .status,
    ).toBe(201);

    const cmEvent = await waitForAuditEvent(
      (e) => e.verb === "create" && e.objectRef?.resource === "configmaps" && e.objectRef.name === cmName,
      { since: next },
    );
    expect(cmEvent.stage).toBe("ResponseComplete");
    expect(cmEvent.responseStatus?.code).toBe(201);

    const secretEvent = await waitForAuditEvent(
      (e) => e.verb === "create" && e.objectRef?.resource === "secrets" && e.objectRef.name === secretName,
      { since: next },
    );
    expect(secretEvent.level).toBe("Metadata");
    expect(secretEvent.requestObject).toBeUndefined();
    expect(secretEvent.responseObject).toBeUndefined();
    expect(JSON.stringify(secretEvent)).not.toContain("hunter2");

    // Objects a SubPool derives map to it from their key: no body leaves the API server.
    const saEvent = await waitForAuditEvent(
      (e) =>
        e.verb === "create" && e.objectRef?.resource === "serviceaccounts" && e.objectRef.name === saName,
      { since: next },
    );
    expect(saEvent.level).toBe("Metadata");
    expect(saEvent.responseObject).toBeUndefined();

    // Reads are not audited (policy level None).
    const { events } = await auditEventsSince(next);
    expect(events.some((e) => e.verb === "get" || e.verb === "list" || e.verb === "watch")).toBe(false);
    expect(events.every((e) => e.stage === "ResponseComplete")).toBe(true);
  });

  // -------------------------------------------------------------------------------------------
  // API semantics, kubectl, authentication
  // -------------------------------------------------------------------------------------------

  it("a resourceVersion-guarded update with a stale version gets 409 Conflict", async () => {
    const name = unique("rv");
    const base = "/api/v1/namespaces/default/configmaps";
    const created = await api("POST", base, { metadata: { name }, data: { v: "1" } });
    const stale = created.body;
    const first = await api("PUT", `${base}/${name}`, { ...stale, data: { v: "2" } });
    expect(first.status).toBe(200);
    const second = await api("PUT", `${base}/${name}`, { ...stale, data: { v: "3" } });
    expect(second.status).toBe(409);
    expect(second.body.reason).toBe("Conflict");
  });

  it("kubectl of the same version talks to it", async () => {
    const { version } = clusterInfo();
    expect(version).toMatch(/^v1\.\d+\.\d+/);
    const v = await kubectl(["version", "-o", "json"]);
    expect(v.code, v.stderr).toBe(0);
    const parsed = JSON.parse(v.stdout) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    expect(parsed.serverVersion.gitVersion).toBe(version);
    expect(parsed.clientVersion.gitVersion).toBe(version);

    const ns = await kubectl(["get", "ns", "-o", "name"]);
    expect(ns.code, ns.stderr).toBe(0);
    expect(ns.stdout.split("\n")).toContain("namespace/default");

    const node = await kubectl([
      "get",
      "node",
      "devnode",
      "-o",
      "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
    ]);
    expect(node.stdout).toBe("True");
  });

  it("the HTTP proxy adds no credentials: a TokenRequest token without RBAC is Forbidden", async () => {
    const ns = unique("rbac");
    await createNamespace(ns);
    const sa = await api("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
      metadata: { name: "nobody" },
    });
    expect(sa.status).toBe(201);
    const tr = await api("POST", `/api/v1/namespaces/${ns}/serviceaccounts/nobody/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 600 },
    });
    expect(tr.status, JSON.stringify(tr.body)).toBe(201);
    const token = tr.body.status.token as string;

    // The TokenRequest is audited at Metadata level: the token never reaches the audit stream.
    const trEvent = await waitForAuditEvent(
      (e) =>
        e.objectRef?.namespace === ns &&
        e.objectRef.resource === "serviceaccounts" &&
        e.objectRef.subresource === "token",
    );
    expect(trEvent.level).toBe("Metadata");
    expect(JSON.stringify(trEvent)).not.toContain(token);

    // The token authenticates as the ServiceAccount...
    const who = await api(
      "POST",
      "/apis/authentication.k8s.io/v1/selfsubjectreviews",
      { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      { token },
    );
    expect(who.status).toBe(201);
    expect(who.body.status.userInfo.username).toBe(`system:serviceaccount:${ns}:nobody`);

    // ...and is not allowed to list pods; neither is a request without any token.
    const pods = await api("GET", `/api/v1/namespaces/${ns}/pods`, undefined, { token });
    expect(pods.status).toBe(403);
    expect(pods.body.message).toContain(`system:serviceaccount:${ns}:nobody`);
    const anonymous = await api("GET", `/api/v1/namespaces/${ns}/pods`, undefined, { token: null });
    expect(anonymous.status).toBe(403);
    expect(anonymous.body.message).toContain("system:anonymous");

    // With a Role granting it, the same token may (RBAC is the only thing deciding).
    expect(
      (
        await api("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
          metadata: { name: "pod-reader" },
          rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["list"] }],
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await api("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
          metadata: { name: "pod-reader" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-reader" },
          subjects: [{ kind: "ServiceAccount", name: "nobody", namespace: ns }],
        })
      ).status,
    ).toBe(201);
    await eventually(
      async () =>
        (await api("GET", `/api/v1/namespaces/${ns}/pods`, undefined, { token })).status === 200
          ? 1
          : undefined,
      { what: "RBAC grant to take effect" },
    );
    await api("DELETE", `/api/v1/namespaces/${ns}`);
  });

  it("the HTTP proxy streams watches", async () => {
    const { httpProxy, adminToken } = clusterInfo();
    const name = unique("watched");
    const list = await api("GET", "/api/v1/namespaces/default/configmaps");
    const rv = list.body.metadata.resourceVersion as string;
    const abort = new AbortController();
    const res = await fetch(
      `${httpProxy}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}&fieldSelector=metadata.name%3D${name}`,
      { headers: { authorization: `Bearer ${adminToken}` }, signal: abort.signal },
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    // Create after the watch is open: the event must arrive while the response is still open.
    expect((await api("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name } })).status).toBe(
      201,
    );
    const decoder = new TextDecoder();
    let buffered = "";
    const deadline = Date.now() + 10_000;
    while (!buffered.includes("\n") && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
    }
    abort.abort();
    const event = JSON.parse(buffered.split("\n")[0]!) as {
      type: string;
      object: { metadata: { name: string } };
    };
    expect(event.type).toBe("ADDED");
    expect(event.object.metadata.name).toBe(name);
  });
});
