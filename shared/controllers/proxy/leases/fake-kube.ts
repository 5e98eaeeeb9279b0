/**
 * Test support, not exported from the folder's index: the runtime's FakeKube with what the lease
 * and orphan code leans on — AlreadyExists on create, delete preconditions, labelSelector on list,
 * and server-set uid and creationTimestamp.
 */

import { FakeKube } from "../../../../test/unit/runtime/fake-kube.ts";
import {
  AlreadyExistsError,
  ConflictError,
  type DeleteOptions,
  type KubeObject,
  type ListOptions,
  type ListPage,
  type ObjectKey,
  type Resource,
} from "../../../kube/index.ts";
import { type ProxyPhase, proxyResource } from "../api.ts";
import { matchesRequirements, parseLabelSelector } from "../discovery/label-selector.ts";

export class LeaseFakeKube extends FakeKube {
  constructor(private readonly now: () => Date = () => new Date("2026-11-30T12:00:00Z")) {
    super();
  }

  override async create<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject): Promise<T> {
    if (this.stored(res, obj.metadata as ObjectKey)) {
      this.calls.push({
        method: "create",
        resource: res.resource,
        key: obj.metadata as ObjectKey,
        body: obj,
      });
      throw new AlreadyExistsError(`${res.resource} "${obj.metadata.name}" already exists`, {
        status: 409,
        reason: "AlreadyExists",
      });
    }
    return super.create<T>(res, {
      ...obj,
      metadata: {
        ...obj.metadata,
        uid: crypto.randomUUID(),
        creationTimestamp: `${this.now().toISOString().slice(0, 19)}Z`,
      },
    });
  }

  override async delete(res: Resource, key: ObjectKey, opts?: DeleteOptions): Promise<void> {
    const current = this.stored(res, key);
    const pre = opts?.preconditions;
    if (
      current &&
      ((pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion) ||
        (pre?.uid !== undefined && pre.uid !== current.metadata.uid))
    ) {
      this.calls.push({ method: "delete", resource: res.resource, key });
      throw new ConflictError("precondition failed", { status: 409, reason: "Conflict" });
    }
    return super.delete(res, key);
  }

  override async list<T extends KubeObject = KubeObject>(
    res: Resource,
    opts?: ListOptions,
  ): Promise<ListPage<T>> {
    const page = await super.list<T>(res, opts);
    const selector = parseLabelSelector(opts?.labelSelector ?? "");
    if (!selector.ok) throw new Error(`LeaseFakeKube: ${selector.error}`);
    return {
      ...page,
      items: page.items.filter((o) => matchesRequirements(o.metadata.labels, selector.requirements)),
    };
  }
}

export interface TestProxy {
  namespace?: string;
  name: string;
  uid?: string;
  phase?: ProxyPhase;
  ip?: string;
  latencyMillis?: number;
  labels?: Record<string, string>;
  mode?: "External" | "Managed";
  endpoint?: { host: string; port: number; scheme: "http" | "https" };
  deleting?: boolean;
  /** Leave out `spec.healthCheck` (such a proxy is never offered to crawlers). */
  noHealthCheck?: boolean;
}

/** A Proxy object as the API server would return it (External by default, status Ready). */
export function testProxy(p: TestProxy): KubeObject {
  const mode = p.mode ?? "External";
  const endpoint =
    p.endpoint ??
    (mode === "External" ? { host: p.ip ?? "10.0.0.1", port: 8080, scheme: "http" } : undefined);
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      namespace: p.namespace ?? "crawl",
      name: p.name,
      uid: p.uid ?? `uid-${p.name}`,
      labels: p.labels ?? {},
      ...(p.deleting ? { deletionTimestamp: "2026-11-30T11:00:00Z" } : {}),
    },
    spec: {
      mode,
      ...(mode === "Managed" ? { provider: "kubernetes" } : {}),
      ...(endpoint ? { endpoint } : {}),
      ...(p.noHealthCheck ? {} : { healthCheck: { probeURL: "http://probe.example/" } }),
    },
    status: {
      phase: p.phase ?? "Ready",
      ...(p.ip === undefined && mode === "External" ? { ip: endpoint?.host } : p.ip ? { ip: p.ip } : {}),
      ...(p.latencyMillis !== undefined ? { latencyMillis: p.latencyMillis } : {}),
    },
  };
}

export { proxyResource };
