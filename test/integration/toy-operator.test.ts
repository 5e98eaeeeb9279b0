/**
 * A toy fourth operator (test/fixtures/toy-operator: one folder) with one line in the list
 * (`[...operators, toyOperator]`), reconciled on the devcluster as kubefn's own least-privileged
 * ServiceAccount: its CRD applied, what `npm run gen:cluster` writes for the extended list applied
 * (its role and binding, the admission policies naming its group), a Toy created, its audit event
 * posted to intake, and the pass the intake enqueued writes its status. Nothing but the folder and
 * the line was written for it. The committed policies are put back after.
 */

import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { clusterFiles } from "../../scripts/gen-cluster.ts";
import { createKubefn, type Kubefn } from "../../shared/app/kubefn.ts";
import { createOperators } from "../../shared/app/operators.ts";
import { operators } from "../../shared/controllers/index.ts";
import { crdFor } from "../../shared/crd/index.ts";
import {
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
  serverSideApply,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Message } from "../../shared/runtime/index.ts";
import { toyCrd, toyOperator, toyResource } from "../fixtures/toy-operator/operator.ts";
import { eventually } from "../setup/cluster.ts";

const suffix = Math.random().toString(36).slice(2, 6);
const auditToken = `audit-${suffix}-token-0123456789`;
const name = `toy-${suffix}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const policyResource = (kind: string, resource: string): Resource => ({
  group: "admissionregistration.k8s.io",
  version: "v1",
  resource,
  kind,
  namespaced: false,
});
const applicable: Record<string, Resource> = {
  ClusterRole: Resources.ClusterRole,
  ClusterRoleBinding: Resources.ClusterRoleBinding,
  ValidatingAdmissionPolicy: policyResource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
  ValidatingAdmissionPolicyBinding: policyResource(
    "ValidatingAdmissionPolicyBinding",
    "validatingadmissionpolicybindings",
  ),
};

let admin: Kube;
let kubefn: Kubefn;
const queued: Message[] = [];
const errors: string[] = [];

const objectsOf = (text: string) =>
  parseAllDocuments(text)
    .map((d) => d.toJSON() as KubeObject | null)
    .filter((o): o is KubeObject => Boolean(o?.kind));

beforeAll(async () => {
  const adminKc = loadKubeConfig({ file: inject("kubeconfig") });
  admin = createKube(createNodeTransport(adminKc));
  await installCrdsAndRbac(admin);
  await serverSideApply(
    admin,
    Resources.CustomResourceDefinition,
    crdFor(toyCrd) as never,
    "kubefn-installer",
    true,
  );
  // What gen:cluster writes for the list with the toy: its role and binding, and the admission
  // policies whose lists of primaries now name its group (so kubefn may write its status).
  const files = await clusterFiles([...operators, toyOperator]);
  const toyRbac = objectsOf(files.get("infra/rbac/kubefn.yaml")!).filter(
    (o) => o.metadata.name === "kubefn-toy",
  );
  const policies = [
    ...objectsOf(files.get("infra/rbac/admission-policy.yaml")!),
    ...objectsOf(files.get("infra/rbac/admission-policy-shapes.yaml")!),
  ];
  expect(toyRbac.map((o) => o.kind).sort()).toEqual(["ClusterRole", "ClusterRoleBinding"]);
  for (const object of [...toyRbac, ...policies]) {
    await serverSideApply(admin, applicable[object.kind]!, object, "kubefn-installer", true);
  }
  await eventually(async () => {
    const crd = await admin.get<
      KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
    >(Resources.CustomResourceDefinition, { name: `${toyCrd.plural}.${toyCrd.group}` });
    return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True") || undefined;
  });

  const token = await serviceAccountToken(createNodeTransport(adminKc), "kubefn-system", "kubefn");
  const settings = parseWorkerEnv({
    KUBE_SERVER: "https://kube.invalid",
    KUBE_TOKEN: "unused",
    AUDIT_TOKEN: auditToken,
  });
  const prober = { probe: async () => ({ ok: true, latencyMs: 1 }) };
  kubefn = createKubefn(
    settings,
    {
      kube: createKube(createNodeTransport(asServiceAccount(adminKc, token)), { fieldManager: "kubefn" }),
      queue: { send: async (messages) => void queued.push(...messages) },
      prober: prober as never,
      log: {
        info: () => {},
        warn: () => {},
        error: (msg, fields) => errors.push(`${msg} ${JSON.stringify(fields)}`),
      },
      metrics: { count: () => {}, observe: () => {}, gauge: () => {} },
    },
    // The one line: kubefn's operators and the toy.
    createOperators({ prober, sweepPeriodSeconds: 60, settings: settings.operators }, [
      ...operators,
      toyOperator,
    ]),
  );
}, 120_000);

afterAll(async () => {
  await admin.delete(toyResource, { name }).catch(() => undefined);
  await admin
    .delete(Resources.CustomResourceDefinition, { name: `${toyCrd.plural}.${toyCrd.group}` })
    .catch(() => undefined);
  for (const kind of ["ClusterRoleBinding", "ClusterRole"]) {
    await admin.delete(applicable[kind]!, { name: "kubefn-toy" }).catch(() => undefined);
  }
  // The committed policies again, as every other file expects them.
  await installCrdsAndRbac(admin);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      await admin.get(Resources.CustomResourceDefinition, { name: `${toyCrd.plural}.${toyCrd.group}` });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    await sleep(200);
  }
}, 120_000);

describe("a toy fourth operator on the devcluster", () => {
  it("its create, posted to intake, becomes a pass that writes its status as kubefn", async () => {
    let toy: KubeObject | undefined;
    for (let attempt = 0; !toy; attempt++) {
      try {
        toy = await admin.create(toyResource, {
          apiVersion: `${toyCrd.group}/${toyCrd.version}`,
          kind: toyCrd.kind,
          metadata: { name },
          spec: { name: "world" },
        });
      } catch (err) {
        // A freshly Established CRD can answer 404 for a moment while its handler is installed.
        if (!isNotFound(err) || attempt > 50) throw err;
        await sleep(200);
      }
    }
    const at = new Date().toISOString();
    const res = await kubefn.fetch(
      new Request("http://kubefn.test/v1/events", {
        method: "POST",
        headers: { authorization: `Bearer ${auditToken}`, "content-type": "application/json" },
        body: JSON.stringify({
          kind: "EventList",
          apiVersion: "audit.k8s.io/v1",
          metadata: {},
          items: [
            {
              level: "RequestResponse",
              auditID: `00000000-0000-4000-8000-0000${suffix}0000`,
              stage: "ResponseComplete",
              requestURI: `/apis/${toyCrd.group}/${toyCrd.version}/toys`,
              verb: "create",
              user: { username: "admin", groups: ["system:masters", "system:authenticated"] },
              objectRef: { resource: "toys", name, apiGroup: toyCrd.group, apiVersion: toyCrd.version },
              responseStatus: { metadata: {}, code: 201 },
              requestReceivedTimestamp: at,
              stageTimestamp: at,
              responseObject: toy,
            },
          ],
        }),
      }),
    );
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    const mine = queued.filter(
      (m) => m.kind !== "job" && m.request.controller === "toy" && m.request.name === name,
    );
    expect(mine).toHaveLength(1);

    await kubefn.consume(mine.map((body) => ({ body })));
    const got = await admin.get<KubeObject & { status?: { greeting?: string; observedGeneration?: number } }>(
      toyResource,
      { name },
    );
    expect(errors).toEqual([]);
    expect(got.status?.greeting).toBe("hello, world");
    expect(got.status?.observedGeneration).toBe(got.metadata.generation);
  });
});
