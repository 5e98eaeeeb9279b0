import type { Resource } from "../../shared/runtime/core/index.ts";
import { type Context, createRegistry, done, mapEvents } from "../../shared/runtime/index.ts";
import { auditEventSchema } from "../../shared/runtime/intake/index.ts";

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const core = (resource: string, kind: string, namespaced = true): Resource => ({
  group: "",
  version: "v1",
  resource,
  kind,
  namespaced,
});
const ProxyResource: Resource = {
  group: "crawl.example.com",
  version: "v1alpha1",
  resource: "proxies",
  kind: "Proxy",
  namespaced: true,
};
const SubPoolResource: Resource = {
  group: "subrelay.example.com",
  version: "v1alpha1",
  resource: "subpools",
  kind: "SubPool",
  namespaced: false,
};

const registry = createRegistry([
  {
    name: "proxy",
    for: ProxyResource,
    owns: [core("pods", "Pod")],
    watches: [
      {
        resource: core("secrets", "Secret"),
        map: (_ctx, c) => [
          { controller: "proxy", namespace: c.key.namespace!, name: `p${c.key.name.length % 50}` },
        ],
      },
    ],
    conditionTypes: ["Provisioned", "Healthy"],
    resyncSeconds: 600,
    reconcile: async () => done(),
  },
  {
    name: "subpool",
    for: SubPoolResource,
    owns: [core("namespaces", "Namespace", false), core("configmaps", "ConfigMap")],
    conditionTypes: ["Ready"],
    resyncSeconds: 1800,
    reconcile: async () => done(),
  },
]);

const noop = () => {};
const ctx: Pick<Context, "kube" | "log" | "metrics"> = {
  kube: undefined as unknown as Context["kube"],
  log: { info: noop, warn: noop, error: noop },
  metrics: { count: noop, observe: noop, gauge: noop },
};

/** A 10,000-event audit EventList in roughly the mix a busy cluster sends under kubefn's policy. */
export function buildEventList(count = 10_000): { kind: string; apiVersion: string; items: unknown[] } {
  const items: unknown[] = [];
  for (let i = 0; i < count; i++) {
    const ns = `ns${i % 40}`;
    const proxy = `p${i % 500}`;
    const base = {
      level: "Metadata",
      auditID: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      stage: "ResponseComplete",
      requestURI: `/apis/crawl.example.com/v1alpha1/namespaces/${ns}/proxies/${proxy}`,
      verb: "update",
      user: { username: "jane@example.com", groups: ["system:authenticated"] },
      sourceIPs: ["10.0.0.1"],
      userAgent: "kubectl/v1.34.1",
      objectRef: {
        resource: "proxies",
        namespace: ns,
        name: proxy,
        apiGroup: "crawl.example.com",
        apiVersion: "v1alpha1",
      },
      responseStatus: { metadata: {}, code: 200 },
      requestReceivedTimestamp: "2026-11-30T12:00:00.000000Z",
      stageTimestamp: "2026-11-30T12:00:00.003000Z",
      annotations: { "authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": "" },
    };
    const slot = i % 20;
    if (slot < 6) {
      items.push({
        ...base,
        verb: "patch",
        user: { username: SELF },
        objectRef: { ...base.objectRef, subresource: "status" },
      });
    } else if (slot < 8) {
      items.push({ ...base, user: { username: SELF } });
    } else if (slot < 10) {
      items.push({ ...base, verb: "patch", level: "RequestResponse" });
    } else if (slot < 12) {
      const pod = `proxy-${i % 700}`;
      items.push({
        ...base,
        level: "RequestResponse",
        verb: "delete",
        objectRef: { resource: "pods", namespace: ns, name: pod, apiVersion: "v1" },
        responseObject: {
          kind: "Pod",
          apiVersion: "v1",
          metadata: {
            name: pod,
            namespace: ns,
            uid: `pod-${i}`,
            ownerReferences: [
              {
                apiVersion: "crawl.example.com/v1alpha1",
                kind: "Proxy",
                name: proxy,
                uid: "u",
                controller: true,
              },
            ],
          },
        },
      });
    } else if (slot < 14) {
      items.push({
        ...base,
        objectRef: {
          resource: "leases",
          namespace: "kube-system",
          name: "kcm",
          apiGroup: "coordination.k8s.io",
          apiVersion: "v1",
        },
      });
    } else if (slot < 15) {
      items.push({
        ...base,
        objectRef: { resource: "secrets", namespace: ns, name: `s${i % 30}`, apiVersion: "v1" },
      });
    } else if (slot < 16) {
      items.push({
        ...base,
        level: "RequestResponse",
        verb: "create",
        objectRef: { resource: "namespaces", name: `subpool-${i % 100}`, apiVersion: "v1" },
        responseStatus: { metadata: {}, code: 201 },
        responseObject: {
          kind: "Namespace",
          apiVersion: "v1",
          metadata: {
            name: `subpool-${i % 100}`,
            ownerReferences: [
              {
                apiVersion: "subrelay.example.com/v1alpha1",
                kind: "SubPool",
                name: `pool${i % 100}`,
                uid: "u",
                controller: true,
              },
            ],
          },
        },
      });
    } else if (slot < 17) {
      items.push({ ...base, stage: "RequestReceived", responseStatus: undefined });
    } else if (slot < 18) {
      items.push({ ...base, responseStatus: { metadata: {}, code: 409 } });
    } else if (slot < 19) {
      items.push({ ...base, verb: "get" });
    } else {
      items.push({
        ...base,
        objectRef: {
          resource: "subpools",
          name: `pool${i % 100}`,
          apiGroup: "subrelay.example.com",
          apiVersion: "v1alpha1",
        },
      });
    }
  }
  return { kind: "EventList", apiVersion: "audit.k8s.io/v1", items };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/**
 * Maps and deduplicates a 10,000-event EventList several times; the median run's throughput.
 * Target: 10,000 events/s on one core. Mappers here are synchronous: this measures intake's own
 * work, not cluster reads.
 */
export async function benchMapping(runs = 9): Promise<{ eventsPerSecond: number; requestsOut: number }> {
  const batch = buildEventList();
  await mapEvents(ctx, registry, batch, { selfUsernames: [SELF] }); // warm-up
  const rates: number[] = [];
  let requestsOut = 0;
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    const result = await mapEvents(ctx, registry, batch, { selfUsernames: [SELF] });
    const seconds = (performance.now() - started) / 1000;
    rates.push(batch.items.length / seconds);
    requestsOut = result.requests.length;
  }
  return { eventsPerSecond: Math.round(median(rates)), requestsOut };
}

/**
 * Reference point for the decision to read audit events by hand: validating each of the same
 * 10,000 events with the zod `auditEventSchema` alone, without any mapping.
 */
export async function benchAuditZod(runs = 5): Promise<{ eventsPerSecond: number; valid: number }> {
  const { items } = buildEventList();
  const rates: number[] = [];
  let valid = 0;
  for (let r = 0; r < runs; r++) {
    valid = 0;
    const started = performance.now();
    for (const item of items) if (auditEventSchema.safeParse(item).success) valid++;
    rates.push(items.length / ((performance.now() - started) / 1000));
  }
  return { eventsPerSecond: Math.round(median(rates)), valid };
}
