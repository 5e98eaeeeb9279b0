import { describe, expect, it } from "vitest";
import { FakeKube } from "../../../test/support/fake-kube.ts";
import {
  ForbiddenError,
  type Kube,
  type KubeObject,
  NotFoundError,
  ReconcileError,
  type Resource,
  Resources,
} from "../../kube/index.ts";
import { bindingSettleMs, grantedKube, subPoolObjectsRole } from "./grant.ts";

const ns = "subpool-demo";
const labels = { "app.kubernetes.io/managed-by": "subpool-operator", "subrelay.example.com/pool": "demo" };

/** RBAC's refusal as the API server words it. */
const rbacRefusal = (verb: string, resource: string) =>
  new ForbiddenError(
    `${resource} "x" is forbidden: User "system:serviceaccount:kubefn-system:kubefn" cannot ${verb} resource "${resource}" in API group "" in the namespace "${ns}"`,
    { status: 403, reason: "Forbidden" },
  );
/** An admission policy's refusal: no verb and resource named. */
const policyRefusal = () =>
  new ForbiddenError(
    "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'kubefn-writes-only-its-own' denied request",
    { status: 403, reason: "Forbidden" },
  );

const seedConfigMap = (kube: FakeKube) =>
  kube.seed(Resources.ConfigMap, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "x", namespace: ns },
  });
const bindings = (kube: FakeKube) =>
  kube.calls.filter((c) => c.method === "create" && c.resource === "rolebindings");

describe("grantedKube: kubefn's calls inside a SubPool's Namespace", () => {
  it("a call RBAC refuses makes the RoleBinding once and is tried again", async () => {
    const kube = new FakeKube();
    seedConfigMap(kube);
    kube.fail("get", rbacRefusal("get", "configmaps"));
    kube.fail("get", rbacRefusal("get", "configmaps"));
    const granted = grantedKube(kube, ns, labels);
    expect((await granted.get(Resources.ConfigMap, { namespace: ns, name: "x" })).metadata.name).toBe("x");
    expect(bindings(kube)).toHaveLength(1);
    expect(kube.stored(Resources.RoleBinding, { namespace: ns, name: subPoolObjectsRole })).toMatchObject({
      metadata: { labels },
      roleRef: { kind: "ClusterRole", name: subPoolObjectsRole },
      subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
    });
    // A second refusal in the same pass waits for the binding instead of making it again.
    kube.fail("get", rbacRefusal("get", "configmaps"));
    await granted.get(Resources.ConfigMap, { namespace: ns, name: "x" });
    expect(bindings(kube)).toHaveLength(1);
  });

  it("an admission policy's refusal, or a call outside the Namespace, is not retried and makes no binding", async () => {
    const kube = new FakeKube();
    seedConfigMap(kube);
    kube.fail("get", policyRefusal());
    const granted = grantedKube(kube, ns, labels);
    await expect(granted.get(Resources.ConfigMap, { namespace: ns, name: "x" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    kube.fail("get", rbacRefusal("get", "configmaps"));
    await expect(granted.get(Resources.ConfigMap, { namespace: "tenant", name: "x" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    expect(bindings(kube)).toEqual([]);
  });

  it("a binding not in force after the retries is a transient error the executor backs off from", async () => {
    const kube = new FakeKube();
    for (let i = 0; i < 8; i++) kube.fail("get", rbacRefusal("get", "configmaps"));
    const granted = grantedKube(kube, ns, labels, true);
    const err = await granted.get(Resources.ConfigMap, { namespace: ns, name: "x" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReconcileError);
    expect(err).toMatchObject({ errorClass: "transient", reason: "SubPoolAccessPending" });
    expect(bindings(kube)).toEqual([]);
  });

  it("regression: after a binding the pass made, a parallel batch sends one create until RBAC has taken it in", async () => {
    // The authorizer refuses every call inside the Namespace until the binding is in force (here:
    // the third call); nine creates sent at once were each refused and tried again.
    const kube = new FakeKube();
    let calls = 0;
    const refused: string[] = [];
    const lagging = Object.assign(Object.create(kube) as Kube, {
      create: async (res: Resource, obj: KubeObject) => {
        if (++calls < 3) {
          refused.push(obj.metadata.name ?? "");
          throw rbacRefusal("create", res.resource);
        }
        return kube.create(res, obj);
      },
    });
    const granted = grantedKube(lagging, ns, labels, true);
    const names = Array.from({ length: 9 }, (_, i) => `cm-${i}`);
    await Promise.all(
      names.map((name) =>
        granted.create(Resources.ConfigMap, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name, namespace: ns },
        }),
      ),
    );
    expect(refused).toEqual(["cm-0", "cm-0"]);
    expect(kube.calls.filter((c) => c.method === "create" && c.resource === "configmaps")).toHaveLength(9);
    expect(bindings(kube)).toEqual([]);
  });

  it("regression (issue 33): after a binding the pass made, the first call waits for the authorizer's usual lag and is not refused", async () => {
    // The authorizer takes the binding in `lag` ms after it was made (a test clock, advanced by the
    // waits the calls make); the first create, sent at once, was refused: 0.34–0.62 a pool in the
    // fleet bench.
    const kube = new FakeKube();
    let now = 0;
    const sleep = async (ms: number) => {
      now += ms;
    };
    const refused: string[] = [];
    const lag = bindingSettleMs - 10;
    const lagging = Object.assign(Object.create(kube) as Kube, {
      create: async (res: Resource, obj: KubeObject) => {
        if (now < lag) {
          refused.push(obj.metadata.name ?? "");
          throw rbacRefusal("create", res.resource);
        }
        return kube.create(res, obj);
      },
    });
    const granted = grantedKube(lagging, ns, labels, true, sleep);
    const names = Array.from({ length: 9 }, (_, i) => `cm-${i}`);
    await Promise.all(
      names.map((name) =>
        granted.create(Resources.ConfigMap, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name, namespace: ns },
        }),
      ),
    );
    expect(refused).toEqual([]);
    expect(now).toBe(bindingSettleMs);
    expect(kube.calls.filter((c) => c.method === "create" && c.resource === "configmaps")).toHaveLength(9);
  });

  it("a pass that did not make the binding does not wait before its calls", async () => {
    const kube = new FakeKube();
    seedConfigMap(kube);
    const waits: number[] = [];
    const granted = grantedKube(kube, ns, labels, false, async (ms) => void waits.push(ms));
    await granted.get(Resources.ConfigMap, { namespace: ns, name: "x" });
    expect(waits).toEqual([]);
  });

  it("where the Namespace does not exist, the call throws the binding's NotFound", async () => {
    const kube = new FakeKube();
    kube.fail("get", rbacRefusal("get", "statefulsets"));
    kube.fail(
      "create",
      new NotFoundError(`namespaces "${ns}" not found`, { status: 404, reason: "NotFound" }),
    );
    const granted = grantedKube(kube, ns, labels);
    await expect(
      granted.get(Resources.StatefulSet, { namespace: ns, name: "demo-cpa-manager" }),
    ).rejects.toBeInstanceOf(NotFoundError);
  });
});
