/**
 * The one in-memory {@link Kube} for unit tests of deciding logic. It behaves as the API server
 * does where kubefn's correctness rests on it, and test/integration/kube-contract.test.ts runs
 * the same cases against it and against the real API server to keep it honest:
 *
 * - a second create of one name is AlreadyExists; the server sets uid and creationTimestamp;
 * - writes carrying a resourceVersion (update, merge patch, status) are Conflicts when stale;
 *   delete preconditions (uid, resourceVersion) likewise;
 * - list filters by namespace and label selector;
 * - delete of an object with finalizers only sets deletionTimestamp; it goes once an update or
 *   patch removes the last finalizer;
 * - server-side apply creates or deep-merges and records the field manager in managedFields.
 *
 * It records every call (`calls`), can be told to fail the next call of a method (`fail`), and
 * seeds objects without any check (`seed`).
 *
 * Caveats: not the API server — no defaulting, no schema validation or pruning, no admission,
 * no garbage collection, merge patches (RFC 7386) and apply only (no JSON patch), no
 * fieldSelector. Anything beyond deciding logic belongs in test/integration.
 */

import {
  REQUIRED_ADMISSION_POLICIES,
  ValidatingAdmissionPolicies,
  ValidatingAdmissionPolicyBindings,
} from "../../shared/app/admission/index.ts";
import { AlreadyExistsError, ConflictError, NotFoundError } from "../../shared/kube/errors.ts";
import { matchesRequirements, parseLabelSelector } from "../../shared/kube/index.ts";
import type {
  DeleteOptions,
  Kube,
  KubeObject,
  ListOptions,
  ListPage,
  ObjectKey,
  Patch,
  Resource,
} from "../../shared/kube/port.ts";
import type { Context, JobMessage, Log, Message, Metrics, PassMessage } from "../../shared/runtime/index.ts";

type Method = keyof Kube;

export class FakeKube implements Kube {
  readonly calls: { method: Method; resource: string; key?: ObjectKey; body?: unknown }[] = [];
  /** Errors to throw, per method, first in first out. */
  readonly failNext = new Map<Method, unknown[]>();
  private readonly objects = new Map<string, KubeObject>();
  private version = 100;
  /**
   * Plays the Deployment controller: every Deployment written is at once rolled out and available
   * (its status says so), as a cluster with running Pods would soon report. Off, a Deployment
   * keeps the status it was given (none: never observed, never available).
   */
  rollsOutDeployments = true;

  /**
   * `now` stamps creationTimestamp and deletionTimestamp. Like an installed cluster it holds
   * kubefn's admission policies and bindings (createKubefn reconciles only then), unless
   * `admissionPolicies` is false.
   */
  constructor(
    private readonly now: () => Date = () => new Date("2026-11-30T12:00:00Z"),
    opts: { admissionPolicies?: boolean } = {},
  ) {
    if (opts.admissionPolicies !== false) seedAdmissionPolicies(this);
  }

  /** Stores `object` as given (a resourceVersion is added when missing), without any check. */
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

  async list<T extends KubeObject = KubeObject>(res: Resource, opts?: ListOptions): Promise<ListPage<T>> {
    this.record("list", res);
    const selector = parseLabelSelector(opts?.labelSelector ?? "");
    if (!selector.ok) throw new Error(`FakeKube: labelSelector: ${selector.error}`);
    const prefix = `${res.group}/${res.resource}/`;
    const items = [...this.objects.entries()]
      .filter(
        ([id, o]) =>
          id.startsWith(prefix) &&
          (!opts?.namespace || o.metadata.namespace === opts.namespace) &&
          matchesRequirements(o.metadata.labels, selector.requirements),
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
    const { deletionTimestamp: _, ...metadata } = obj.metadata;
    return this.seed(res, {
      ...obj,
      metadata: {
        ...metadata,
        resourceVersion: undefined,
        uid: obj.metadata.uid ?? crypto.randomUUID(),
        creationTimestamp: obj.metadata.creationTimestamp ?? this.timestamp(),
      },
    }) as T;
  }

  async update<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject): Promise<T> {
    this.record("update", res, obj.metadata as ObjectKey, obj);
    const current = this.require(res, obj.metadata as ObjectKey);
    this.guard(current, obj.metadata.resourceVersion);
    const next = { ...obj, status: current.status };
    next.metadata = {
      ...obj.metadata,
      ...(current.metadata.deletionTimestamp
        ? { deletionTimestamp: current.metadata.deletionTimestamp }
        : {}),
    };
    return this.storeOrFinalize(res, next) as T;
  }

  async patch<T extends KubeObject = KubeObject>(res: Resource, key: ObjectKey, patch: Patch): Promise<T> {
    this.record("patch", res, key, patch);
    if (patch.type === "apply") return this.apply(res, key, patch) as T;
    return this.applyMerge(res, key, patch, false) as T;
  }

  async delete(res: Resource, key: ObjectKey, opts?: DeleteOptions): Promise<void> {
    this.record("delete", res, key);
    const current = this.require(res, key);
    const pre = opts?.preconditions;
    if (
      (pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion) ||
      (pre?.uid !== undefined && pre.uid !== current.metadata.uid)
    ) {
      throw new ConflictError("precondition failed", { status: 409, reason: "Conflict" });
    }
    if ((current.metadata.finalizers ?? []).length > 0) {
      if (!current.metadata.deletionTimestamp) {
        this.store(res, {
          ...current,
          metadata: { ...current.metadata, deletionTimestamp: this.timestamp() },
        });
      }
      return;
    }
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
    if (patch.type !== "merge")
      throw new Error(`FakeKube supports merge and apply patches, got ${patch.type}`);
    const current = this.require(res, key);
    const body = patch.body as { metadata?: { resourceVersion?: string }; status?: unknown };
    this.guard(current, body.metadata?.resourceVersion);
    const merged = mergePatch(current, statusOnly ? { status: body.status } : body) as KubeObject;
    return statusOnly ? this.store(res, merged) : this.storeOrFinalize(res, merged);
  }

  private apply(res: Resource, key: ObjectKey, patch: Extract<Patch, { type: "apply" }>): KubeObject {
    const current = this.objects.get(this.id(res, key));
    const merged = (current ? deepMerge(current, patch.body) : structuredClone(patch.body)) as KubeObject;
    const managed = (merged.metadata.managedFields ?? []) as { manager?: string; operation?: string }[];
    if (!managed.some((m) => m.manager === patch.fieldManager && m.operation === "Apply")) {
      merged.metadata.managedFields = [...managed, { manager: patch.fieldManager, operation: "Apply" }];
    }
    merged.metadata.uid = current?.metadata.uid ?? `uid-${res.resource}-${key.name}`;
    merged.metadata.creationTimestamp = current?.metadata.creationTimestamp ?? this.timestamp();
    return this.store(res, merged);
  }

  /** Stores a write; an object being deleted whose last finalizer the write removed goes. */
  private storeOrFinalize(res: Resource, object: KubeObject): KubeObject {
    if (object.metadata.deletionTimestamp && (object.metadata.finalizers ?? []).length === 0) {
      this.objects.delete(this.id(res, object.metadata));
      return structuredClone({
        ...object,
        metadata: { ...object.metadata, resourceVersion: String(++this.version) },
      });
    }
    return this.store(res, object);
  }

  private store(res: Resource, object: KubeObject): KubeObject {
    const stored = structuredClone(object);
    if (this.rollsOutDeployments && res.resource === "deployments") {
      const replicas = (stored.spec as { replicas?: number } | undefined)?.replicas ?? 1;
      stored.status = {
        observedGeneration: stored.metadata.generation ?? 0,
        replicas,
        updatedReplicas: replicas,
        availableReplicas: replicas,
      };
    }
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

  private timestamp(): string {
    return `${this.now().toISOString().slice(0, 19)}Z`;
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

function deepMerge(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return structuredClone(patch);
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(out[k], v);
  return out;
}

export interface Recorded {
  /** Each send: its passes (`messages`) and, apart, its jobs (`jobs`, only on a send that had any). */
  sent: { messages: PassMessage[]; jobs?: JobMessage[]; delaySeconds: number | undefined }[];
  logs: { level: string; msg: string; fields?: Record<string, unknown> }[];
  counts: { name: string; labels?: Record<string, string> }[];
}

/** A Context around a Kube that records what was sent, logged and counted. */
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
        const jobs = messages.filter((m): m is JobMessage => m.kind === "job");
        recorded.sent.push({
          messages: passesOf(messages),
          ...(jobs.length > 0 ? { jobs } : {}),
          delaySeconds,
        });
      },
    },
    clock: { now: () => opts.now ?? new Date("2026-11-30T12:00:00Z") },
    log,
    metrics,
    random: () => opts.random ?? 0.5,
  };
  return { ctx, recorded };
}

/**
 * Seeds kubefn's admission policies and their bindings into `kube`, as an installed cluster has
 * them (a new FakeKube has them already): createKubefn reconciles only then (shared/app/admission).
 */
export function seedAdmissionPolicies(kube: FakeKube): FakeKube {
  for (const name of REQUIRED_ADMISSION_POLICIES) {
    kube.seed(ValidatingAdmissionPolicies, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name },
    });
    kube.seed(ValidatingAdmissionPolicyBindings, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name },
      spec: { policyName: name, validationActions: ["Deny"] },
    } as never);
  }
  return kube;
}

/** The passes among `messages` (a test's queue that keeps passes only). */
export function passesOf(messages: readonly Message[]): PassMessage[] {
  return messages.filter((m): m is PassMessage => m.kind !== "job");
}
