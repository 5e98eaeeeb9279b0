/**
 * Which fields of an owned object this controller writes, per kind. Everything else — the
 * API server's defaults (a Service's clusterIP, a container's terminationMessagePath), other
 * systems' labels — is kept.
 */

import { isRecord } from "../../guards/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import { covers, fieldsPatch, type MergePatch, valueAt } from "../../kube/index.ts";

export type OwnedFields = (observed: KubeObject, desired: KubeObject) => MergePatch | null;

/** Paths synced exactly: observed must equal desired there (the Service's type, ports, selector). */
export function exactly(...paths: string[]): OwnedFields {
  return (observed, desired) => fieldsPatch(observed, desired, paths);
}

/**
 * Paths synced by {@link covers}: a path that drifted is replaced by the desired value; one that
 * only carries server defaults beside ours is left alone.
 *
 * Caveats: a key dropped from `desired` is not removed from `observed` until something else at
 * that path drifts (the whole path is then written).
 */
export function covering(...paths: string[]): OwnedFields {
  return (observed, desired) => {
    const drifted = paths.filter((dotted) => {
      const path = dotted.split(".");
      return !covers(valueAt(observed, path), valueAt(desired, path));
    });
    return drifted.length === 0 ? null : fieldsPatch(observed, desired, drifted);
  };
}

/** Both at once: `exact` paths by equality, `covered` paths by {@link covers}. */
export function combine(...parts: OwnedFields[]): OwnedFields {
  return (observed, desired) => {
    let patch: MergePatch | null = null;
    for (const part of parts) {
      const sub = part(observed, desired);
      if (sub) patch = mergeInto(patch ?? {}, sub);
    }
    return patch;
  };
}

function mergeInto(target: MergePatch, source: MergePatch): MergePatch {
  for (const [k, v] of Object.entries(source)) {
    const existing = target[k];
    target[k] = isRecord(existing) && isRecord(v) ? mergeInto(existing, v) : v;
  }
  return target;
}
