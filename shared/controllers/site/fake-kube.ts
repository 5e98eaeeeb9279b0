/**
 * Test double: the runtime's in-memory FakeKube plus server-side apply as far as Site components
 * use it (create or deep-merge the body, record the field manager in managedFields).
 */

import { FakeKube } from "../../../test/unit/runtime/fake-kube.ts";
import type { KubeObject, ObjectKey, Patch, Resource } from "../../kube/port.ts";

export class ApplyFakeKube extends FakeKube {
  override async patch<T extends KubeObject = KubeObject>(
    res: Resource,
    key: ObjectKey,
    patch: Patch,
  ): Promise<T> {
    if (patch.type !== "apply") return super.patch<T>(res, key, patch);
    this.calls.push({ method: "patch", resource: res.resource, key, body: patch });
    const queued = this.failNext.get("patch");
    if (queued && queued.length > 0) throw queued.shift();
    const current = this.stored(res, key);
    const merged = (current ? deepMerge(current, patch.body) : structuredClone(patch.body)) as KubeObject;
    const managed = (merged.metadata.managedFields ?? []) as { manager?: string; operation?: string }[];
    if (!managed.some((m) => m.manager === patch.fieldManager && m.operation === "Apply")) {
      merged.metadata.managedFields = [...managed, { manager: patch.fieldManager, operation: "Apply" }];
    }
    delete merged.metadata.resourceVersion;
    if (current?.metadata.uid) merged.metadata.uid = current.metadata.uid;
    merged.metadata.uid ??= `uid-${res.resource}-${key.name}`;
    return this.seed(res, merged) as T;
  }
}

function deepMerge(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return structuredClone(patch);
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(out[k], v);
  return out;
}
