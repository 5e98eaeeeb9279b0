/**
 * Issue 19, item 7: one list of kubefn's identities. kubefn may authenticate as something other
 * than the kubefn-system/kubefn ServiceAccount (an EKS role, a Google account, its own OIDC
 * issuer's subject); the admission policies contain whoever `SELF_USERNAMES` names, not the
 * ServiceAccount's name written into them. Here a second identity with kubefn's RBAC (a
 * ServiceAccount of another name, standing in for any username) is listed and tried with a
 * representative few of the stolen-token attacks (security-stolen-token.test.ts): each is refused
 * exactly as for the ServiceAccount, and the shape kubefn writes is admitted. A third identity
 * with the same RBAC but not listed is not contained: the list, not the RBAC, decides.
 */

import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { currentCluster } from "../../cli/cluster.ts";
import { policyChecks } from "../../cli/doctor.ts";
import {
  asServiceAccount,
  installCrdsAndRbac,
  manifestsIn,
  optInNamespace,
  serviceAccountToken,
} from "../../functions/node/install.ts";
import { DEFAULT_IDENTITY, ValidatingAdmissionPolicies } from "../../shared/app/admission/index.ts";
import { buildPod, type Pod } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import { nameFromUID, ownerTags } from "../../shared/controllers/proxy/providers/provider.ts";
import {
  createKube,
  ForbiddenError,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { clusterInfo, kubeConfig } from "../setup/cluster.ts";
import { deleteNow as deleteAndWait } from "../support/namespaces.ts";

const suffix = Date.now().toString(36);
const victims = `identities-${suffix}`;
const second = `kubefn-second-${suffix}`;
const outsider = `kubefn-outsider-${suffix}`;
const usernameOf = (sa: string) => `system:serviceaccount:kubefn-system:${sa}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let admin: Kube;
const as: Record<string, Kube> = {};
/** The bindings that give `second` and `outsider` kubefn's RBAC, removed after. */
const bindings: KubeObject[] = [];

type Binding = KubeObject & { subjects?: Array<{ kind: string; name: string; namespace?: string }> };

const deleteNow = (res: Resource, key: { namespace?: string; name: string }) =>
  deleteAndWait(admin, res, key);

/** Tries `write` until refused (403): a policy change takes effect a moment after it is stored. */
async function refused(what: string, write: () => Promise<unknown>, undo: () => Promise<void>) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await write();
    } catch (err) {
      if (err instanceof ForbiddenError) return (err as Error).message;
      throw new Error(`${what}: ${(err as Error).message}`, { cause: err });
    }
    await undo();
    if (Date.now() > deadline) throw new Error(`${what}: the API server took it (no 403 after 15 s)`);
    await sleep(250);
  }
}

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()));
  // The installer, told kubefn runs as the ServiceAccount and `second` (SELF_USERNAMES).
  await installCrdsAndRbac(admin, undefined, [DEFAULT_IDENTITY, usernameOf(second)]);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: victims },
  });
  await optInNamespace(admin, victims);
  const kubefnBindings = (await manifestsIn("rbac")).filter(
    (o): o is Binding =>
      (o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding") &&
      ((o as Binding).subjects ?? []).some((s) => s.kind === "ServiceAccount" && s.name === "kubefn"),
  );
  const tenant = await admin.get<Binding>(Resources.RoleBinding, {
    namespace: victims,
    name: "kubefn-tenant",
  });
  for (const sa of [second, outsider]) {
    await admin.create(Resources.ServiceAccount, {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: sa, namespace: "kubefn-system" },
    });
    for (const b of [...kubefnBindings, tenant]) {
      const copy: Binding = {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: b.kind,
        metadata: {
          name: `${b.metadata.name}-${sa}`,
          ...(b.metadata.namespace ? { namespace: b.metadata.namespace } : {}),
        },
        roleRef: b.roleRef,
        subjects: [{ kind: "ServiceAccount", name: sa, namespace: "kubefn-system" }],
      };
      await admin.create(
        b.kind === "RoleBinding" ? Resources.RoleBinding : Resources.ClusterRoleBinding,
        copy,
      );
      bindings.push(copy);
    }
    const token = await serviceAccountToken(createNodeTransport(kubeConfig()), "kubefn-system", sa, 3600);
    as[sa] = createKube(createNodeTransport(asServiceAccount(kubeConfig(), token)), {
      fieldManager: "kubefn",
    });
  }
  const token = await serviceAccountToken(createNodeTransport(kubeConfig()), "kubefn-system", "kubefn", 3600);
  as.kubefn = createKube(createNodeTransport(asServiceAccount(kubeConfig(), token)), {
    fieldManager: "kubefn",
  });
}, 120_000);

afterAll(async () => {
  for (const b of bindings) {
    await admin
      ?.delete(b.kind === "RoleBinding" ? Resources.RoleBinding : Resources.ClusterRoleBinding, {
        ...(b.metadata.namespace ? { namespace: b.metadata.namespace } : {}),
        name: b.metadata.name ?? "",
      })
      .catch(() => {});
  }
  for (const sa of [second, outsider]) {
    await admin?.delete(Resources.ServiceAccount, { namespace: "kubefn-system", name: sa }).catch(() => {});
  }
  await admin?.delete(Resources.Namespace, { name: victims }).catch(() => {});
  // Back to the default install's list (the ServiceAccount alone) for the files after this one.
  if (admin) await installCrdsAndRbac(admin);
}, 60_000);

const contained = [
  ["the ServiceAccount", "kubefn"],
  ["a second listed identity", second],
] as const;

describe.each(contained)("%s is contained by the admission policies", (_, who) => {
  const uid = crypto.randomUUID();
  const name = nameFromUID(uid);
  const built = (): Pod =>
    buildPod({ name, namespace: victims, cloudInit: "#cloud-config\n", instance: {}, tags: ownerTags(uid) });

  it("cannot write an object that is not kubefn's (an unlabelled ConfigMap in kubefn-system)", async () => {
    const cm = `not-kubefns-${suffix}`;
    const message = await refused(
      "an unlabelled ConfigMap",
      () =>
        as[who]!.create(Resources.ConfigMap, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: cm, namespace: "kubefn-system" },
        }),
      () => deleteNow(Resources.ConfigMap, { namespace: "kubefn-system", name: cm }),
    );
    expect(message).toMatch(/kubefn-writes-only-its-own/);
  });

  it("cannot create a proxy instance Pod of an image the installer did not allow", async () => {
    const pod = built();
    const container = (pod.spec?.containers[0] ?? {}) as Record<string, unknown>;
    container.image = "attacker.example/miner:1";
    const message = await refused(
      "a px-* Pod of another image",
      () => as[who]!.create(Resources.Pod, pod),
      () => deleteNow(Resources.Pod, { namespace: victims, name }),
    );
    expect(message).toMatch(/kubefn-pods-are-proxy-instances/);
  });

  it("cannot widen the installer's allow-list of SubPool hostnames", async () => {
    const key = { namespace: "kubefn-system", name: "kubefn-subpool-hostnames" };
    const current = () => admin.get<KubeObject & { data?: Record<string, string> }>(Resources.ConfigMap, key);
    const { data } = await current();
    await refused(
      "a wider allow-list",
      async () => {
        const now = await current();
        await as[who]!.update(Resources.ConfigMap, { ...now, data: { ...now.data, evil: "*" } });
      },
      async () => void (await admin.update(Resources.ConfigMap, { ...(await current()), data })),
    );
  });

  it("the Pod the pod provider builds is admitted", async () => {
    await as[who]!.create(Resources.Pod, built());
    await deleteNow(Resources.Pod, { namespace: victims, name });
  });
});

describe("an identity with kubefn's RBAC that SELF_USERNAMES does not name", () => {
  it("is not contained: the list decides, not the RBAC (and doctor names it, see cli.test.ts)", async () => {
    const cm = `outsider-${suffix}`;
    await as[outsider]!.create(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: cm, namespace: "kubefn-system" },
    });
    await deleteNow(Resources.ConfigMap, { namespace: "kubefn-system", name: cm });
  });
});

describe("kubefn doctor", () => {
  const doctor = async (name: string) => {
    const policies = (await manifestsIn("rbac")).filter((o) =>
      o.kind.startsWith("ValidatingAdmissionPolicy"),
    );
    const checks = await policyChecks(
      currentCluster({ kubeconfig: clusterInfo().kubeconfig }),
      { namespace: "kubefn-system", name },
      policies as Parameters<typeof policyChecks>[2],
    );
    return checks.map((c) => `${c.ok ? "ok  " : "fail"} ${c.what}`);
  };

  it("finds the policies installed for the list, each identity in it and among the status writers", async () => {
    const lines = await doctor(second);
    expect(lines.filter((l) => l.startsWith("fail"))).toEqual([]);
    expect(lines).toContain(
      `ok   the admission policies contain kubefn's identities: ${DEFAULT_IDENTITY}, ${usernameOf(second)}`,
    );
    expect(lines).toContain(
      `ok   ${usernameOf(second)} may write kubefn's status (ConfigMap kubefn-system/kubefn-status-writers)`,
    );
  });

  it("fails an identity the policies do not contain", async () => {
    expect(await doctor(outsider)).toContain(
      `fail ${usernameOf(outsider)} is not among the identities the admission policies contain: its writes are not held to kubefn's shape`,
    );
  });

  it("fails policies that name different identities", async () => {
    const policy = await admin.get<
      KubeObject & { spec: { matchConditions: Array<{ name: string; expression: string }> } }
    >(ValidatingAdmissionPolicies, { name: "kubefn-never-edits-specs" });
    onTestFinished(() =>
      installCrdsAndRbac(admin, undefined, [DEFAULT_IDENTITY, usernameOf(second)]).then(() => undefined),
    );
    await admin.update(ValidatingAdmissionPolicies, {
      ...policy,
      spec: {
        ...policy.spec,
        matchConditions: policy.spec.matchConditions.map((c) =>
          c.name === "kubefn-identity"
            ? { ...c, expression: `request.userInfo.username in ['${DEFAULT_IDENTITY}']` }
            : c,
        ),
      },
    });
    const lines = await doctor("kubefn");
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^fail the admission policies contain different identities: .*kubefn-never-edits-specs \[system:serviceaccount:kubefn-system:kubefn\]/,
      ),
    );
    expect(lines).toContain(
      "fail ValidatingAdmissionPolicy kubefn-never-edits-specs differs from this release's",
    );
  });
});
