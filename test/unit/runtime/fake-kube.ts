import { AlreadyExistsError, ConflictError, NotFoundError } from "../../../shared/kube/errors.ts";
import type { Kube, KubeObject, ListPage, ObjectKey, Patch, Resource } from "../../../shared/kube/port.ts";
import type { Context, Log, Message, Metrics } from "../../../shared/runtime/types.ts";

type Method = keyof Kube;

/**
 * An in-memory Kube for deciding-logic tests of the executor and mappers: it keeps objects by
 * resource and key, bumps resourceVersion on writes, guards writes that carry one, and records
 * every call. Not a substitute for the real API server (see test/integration).
 */
export class FakeKube implements Kube {
  readonly calls: { method: Method; resource: string; key?: ObjectKey; body?: unknown }[] = [];
  /** Errors to throw, per method, first in first out. */
  readonly failNext = new Map<Method, unknown[]>();
  private readonly objects = new Map<string, KubeObject>();
  private version = 100;

  seed(res: Resource, object: KubeObject): KubeObject {
    const stored = structuredClone(object);
    stored.metadata.resourceVersion ??= String(++this.version);
    this.objects.set(this.id(res, stored.metadata), stored);
    return structuredClone(stored);
  }

  stored(res: Resource, key: ObjectKey): KubeObject | undefined {
    const found = this.objects.get(this.id(res, key));
    return found ? structuredClone(found) : undefined;
  }

  writes(): number {
    return this.calls.filter((c) => c.method !== "get" && c.method !== "list").length;
  }

  fail(method: Method, err: unknown): void {
    const queue = this.failNext.get(method) ?? [];
    queue.push(err);
    this.failNext.set(method, queue);
  }

  async get<T extends KubeObject = KubeObject>(res: Resource, key: ObjectKey): Promise<T> {
    this.record("get", res, key);
    return structuredClone(this.require(res, key)) as T;
  }

  async list<T extends KubeObject = KubeObject>(
    res: Resource,
    opts?: { namespace?: string },
  ): Promise<ListPage<T>> {
    this.record("list", res);
    const prefix = `${res.group}/${res.resource}/`;
    const items = [...this.objects.entries()]
      .filter(
        ([id, o]) => id.startsWith(prefix) && (!opts?.namespace || o.metadata.namespace === opts.namespace),
      )
      .map(([, o]) => structuredClone(o) as T);
    return { items, resourceVersion: String(this.version) };
  }

  async create<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject): Promise<T> {
    this.record("create", res, obj.metadata as ObjectKey, obj);
    if (this.objects.has(this.id(res, obj.metadata))) {
      throw new AlreadyExistsError(`${res.resource} "${obj.metadata.name}" already exists`, {
        status: 409,
        reason: "AlreadyExists",
      });
    }
    return this.seed(res, { ...obj, metadata: { ...obj.metadata, resourceVersion: undefined } }) as T;
  }

  async update<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject): Promise<T> {
    this.record("update", res, obj.metadata as ObjectKey, obj);
    const current = this.require(res, obj.metadata as ObjectKey);
    this.guard(current, obj.metadata.resourceVersion);
    return this.store(res, { ...obj, status: current.status }) as T;
  }

  async patch<T extends KubeObject = KubeObject>(res: Resource, key: ObjectKey, patch: Patch): Promise<T> {
    this.record("patch", res, key, patch);
    return this.applyMerge(res, key, patch, false) as T;
  }

  async delete(res: Resource, key: ObjectKey): Promise<void> {
    this.record("delete", res, key);
    this.require(res, key);
    this.objects.delete(this.id(res, key));
  }

  async updateStatus<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject): Promise<T> {
    this.record("updateStatus", res, obj.metadata as ObjectKey, obj);
    const current = this.require(res, obj.metadata as ObjectKey);
    this.guard(current, obj.metadata.resourceVersion);
    return this.store(res, { ...current, status: obj.status }) as T;
  }

  async patchStatus<T extends KubeObject = KubeObject>(
    res: Resource,
    key: ObjectKey,
    patch: Patch,
  ): Promise<T> {
    this.record("patchStatus", res, key, patch);
    return this.applyMerge(res, key, patch, true) as T;
  }

  private applyMerge(res: Resource, key: ObjectKey, patch: Patch, statusOnly: boolean): KubeObject {
    if (patch.type !== "merge") throw new Error(`FakeKube supports merge patches only, got ${patch.type}`);
    const current = this.require(res, key);
    const body = patch.body as { metadata?: { resourceVersion?: string }; status?: unknown };
    this.guard(current, body.metadata?.resourceVersion);
    const merged = mergePatch(current, statusOnly ? { status: body.status } : body) as KubeObject;
    return this.store(res, merged);
  }

  private store(res: Resource, object: KubeObject): KubeObject {
    const stored = structuredClone(object);
    stored.metadata.resourceVersion = String(++this.version);
    this.objects.set(this.id(res, stored.metadata), stored);
    return structuredClone(stored);
  }

  private guard(current: KubeObject, resourceVersion: string | undefined): void {
    if (resourceVersion !== undefined && resourceVersion !== current.metadata.resourceVersion) {
      throw new ConflictError("the object has been modified", { status: 409, reason: "Conflict" });
    }
  }

  private require(res: Resource, key: ObjectKey): KubeObject {
    const found = this.objects.get(this.id(res, key));
    if (!found)
      throw new NotFoundError(`${res.resource} "${key.name}" not found`, { status: 404, reason: "NotFound" });
    return found;
  }

  private record(method: Method, res: Resource, key?: ObjectKey, body?: unknown): void {
    this.calls.push({ method, resource: res.resource, ...(key ? { key } : {}), ...(body ? { body } : {}) });
    const queued = this.failNext.get(method);
    if (queued && queued.length > 0) throw queued.shift();
  }

  private id(res: Resource, key: { namespace?: string | undefined; name?: string | undefined }): string {
    return `${res.group}/${res.resource}/${key.namespace ?? ""}/${key.name ?? ""}`;
  }
}

function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

export interface Recorded {
  sent: { messages: Message[]; delaySeconds: number | undefined }[];
  logs: { level: string; msg: string; fields?: Record<string, unknown> }[];
  counts: { name: string; labels?: Record<string, string> }[];
}

/** A Context around a FakeKube that records what was sent, logged and counted. */
export function fakeContext(
  kube: Kube,
  opts: { random?: number; now?: Date } = {},
): { ctx: Context; recorded: Recorded } {
  const recorded: Recorded = { sent: [], logs: [], counts: [] };
  const log: Log = {
    info: (msg, fields) => recorded.logs.push({ level: "info", msg, ...(fields ? { fields } : {}) }),
    warn: (msg, fields) => recorded.logs.push({ level: "warn", msg, ...(fields ? { fields } : {}) }),
    error: (msg, fields) => recorded.logs.push({ level: "error", msg, ...(fields ? { fields } : {}) }),
  };
  const metrics: Metrics = {
    count: (name, labels) => recorded.counts.push({ name, ...(labels ? { labels } : {}) }),
    observe: () => {},
    gauge: () => {},
  };
  const ctx: Context = {
    kube,
    queue: {
      send: async (messages, delaySeconds) => {
        recorded.sent.push({ messages, delaySeconds });
      },
    },
    clock: { now: () => opts.now ?? new Date("2026-11-30T12:00:00Z") },
    log,
    metrics,
    random: () => opts.random ?? 0.5,
  };
  return { ctx, recorded };
}
