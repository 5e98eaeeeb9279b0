/**
 * SubPool seed behaviours on the devcluster, through its own kubectl and audit webhook:
 * `examples/subpool-internal.yaml` and the `sp` short name; the seed's predicate applied to the
 * audit events of real label-only, same-generation and spec writes; and a lowered envelope that
 * neither errors a running pool nor stops it from being suspended.
 */
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { parseOperatorConfig } from "../../shared/controllers/subpool/config.ts";
import { subPoolController } from "../../shared/controllers/subpool/controller.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import {
  type Context,
  createRegistry,
  mapEvents,
  type PassMessage,
  type Registry,
  runPass,
} from "../../shared/runtime/index.ts";
import { type AuditEvent, auditEventsSince, eventually, kubeConfig, kubectl } from "../setup/cluster.ts";
import { passContext } from "../support/pass-context.ts";

const example = new URL("../../examples/subpool-internal.yaml", import.meta.url);
const name = "demo-pool";
type Pool = KubeObject & {
  spec: { suspend?: boolean };
  status?: { namespace?: string; conditions?: { type: string; status: string; reason: string }[] };
};

let kube: Kube;
let registry: Registry;
let ctx: Context;
const message = (pool: string): PassMessage => ({
  request: { controller: "subpool", name: pool },
  attempt: 0,
});
const condition = (p: Pool, type: string) => p.status?.conditions?.find((c) => c.type === type);

beforeAll(async () => {
  kube = createKube(createNodeTransport(kubeConfig()));
  await installCrdsAndRbac(kube);
  registry = createRegistry([subPoolController()]);
  ctx = passContext(kube);
}, 120_000);

describe("SubPool seed behaviours on the devcluster", () => {
  it("examples/subpool-internal.yaml applies with kubectl, `kubectl get sp` lists it, and it reaches its documented state", async () => {
    const applied = await kubectl(["apply", "-f", "-"], readFileSync(example, "utf8"));
    expect(applied.stdout).toContain(`subpool.subrelay.example.com/${name} created`);
    await runPass(ctx, registry, message(name));
    await runPass(ctx, registry, message(name));
    const listed = await kubectl(["get", "sp", name, "--no-headers"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^${name}\\s+Internal\\s+false\\s+subpool-${name}\\s+False`));
    const pool = await kube.get<Pool>(subPoolResource, { name });
    expect(pool.status?.namespace).toBe(`subpool-${name}`);
    expect(["StatefulSetNotReady", "ProxyGatewayNotReady"]).toContain(condition(pool, "Ready")?.reason);
    const sts = await kube.get(Resources.StatefulSet, {
      namespace: `subpool-${name}`,
      name: `${name}-cpa-manager`,
    });
    expect(sts.metadata.ownerReferences?.[0]).toMatchObject({ kind: "SubPool", name, controller: true });
  });

  it("label-only and status-only writes trigger no pass on the audit path; a spec change does", async () => {
    const since = (await auditEventsSince()).next;
    // The webhook delivers in batches: earlier writes (the create, the finalizer) may still arrive
    // after `since`; only requests received from here on count.
    const started = Date.now() - 1;
    expect((await kubectl(["label", "sp", name, "team=crawl"])).code).toBe(0);
    expect((await kubectl(["annotate", "sp", name, "note=seen"])).code).toBe(0);
    // A PUT of the object as read with only a label changed: same generation before and after.
    const current = JSON.parse((await kubectl(["get", "sp", name, "-o", "json"])).stdout) as Pool;
    current.metadata.labels = { ...current.metadata.labels, tier: "gold" };
    expect((await kubectl(["replace", "-f", "-"], JSON.stringify(current))).code).toBe(0);
    // A status-only write through the status subresource.
    expect(
      (
        await kubectl([
          "patch",
          "sp",
          name,
          "--subresource=status",
          "--type=merge",
          "-p",
          '{"status":{"cpaService":"by-hand"}}',
        ])
      ).code,
    ).toBe(0);
    expect(
      (await kubectl(["patch", "sp", name, "--type=merge", "-p", '{"spec":{"suspend":true}}'])).code,
    ).toBe(0);

    const ours = (e: AuditEvent) =>
      e.stage === "ResponseComplete" &&
      e.objectRef?.resource === "subpools" &&
      e.objectRef.name === name &&
      Date.parse((e as { requestReceivedTimestamp?: string }).requestReceivedTimestamp ?? "") >= started;
    const events = await eventually(
      async () => {
        const got = (await auditEventsSince(since)).events.filter(ours);
        return got.length >= 5 ? got : undefined;
      },
      { what: "the five SubPool writes in the audit stream", timeoutMs: 20_000 },
    );
    const requestsOf = async (e: AuditEvent) =>
      (await mapEvents(ctx, registry, { kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [e] }))
        .requests;
    const [label, annotate, replace, status, spec] = events;
    expect(label!.level).toBe("RequestResponse");
    expect(await requestsOf(label!)).toEqual([]);
    expect(await requestsOf(annotate!)).toEqual([]);
    expect(replace!.verb).toBe("update");
    expect(await requestsOf(replace!)).toEqual([]);
    expect(status!.objectRef?.subresource).toBe("status");
    expect(await requestsOf(status!)).toEqual([]);
    expect(await requestsOf(spec!)).toEqual([{ controller: "subpool", name }]);
    await runPass(ctx, registry, message(name));
    await kubectl(["patch", "sp", name, "--type=merge", "-p", '{"spec":{"suspend":false}}']);
    await runPass(ctx, registry, message(name));
  });

  it("lowering the envelope never turns the running pool into a permanent error: it reconciles and can be suspended", async () => {
    const lowered = parseOperatorConfig({ maxCPU: "500m", maxMemory: "512Mi" });
    if (!lowered.ok) throw new Error(lowered.message);
    const restarted = createRegistry([subPoolController({ operatorConfig: lowered.config })]);
    const result = await runPass(ctx, restarted, message(name));
    expect(result.result).not.toBe("error");
    expect(condition(await kube.get<Pool>(subPoolResource, { name }), "Ready")?.reason).not.toBe(
      "ResourceEnvelopeExceeded",
    );
    await kube.patch(subPoolResource, { name }, { type: "merge", body: { spec: { suspend: true } } });
    expect(await runPass(ctx, restarted, message(name))).toMatchObject({ result: "done" });
    const sts = await kube.get<KubeObject & { spec: { replicas: number } }>(Resources.StatefulSet, {
      namespace: `subpool-${name}`,
      name: `${name}-cpa-manager`,
    });
    expect(sts.spec.replicas).toBe(0);
    expect(condition(await kube.get<Pool>(subPoolResource, { name }), "Suspended")?.status).toBe("True");

    await kubectl(["delete", "sp", name, "--wait=false"]);
    await eventually(
      async () => {
        await runPass(ctx, registry, message(name));
        const gone = await kube.get(subPoolResource, { name }).then(
          () => false,
          () => true,
        );
        return gone ? true : undefined;
      },
      { what: "the example pool deleted", timeoutMs: 90_000, intervalMs: 300 },
    );
  });
});
