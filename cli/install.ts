/**
 * `kubefn install [--dry-run]`: server-side applies install.yaml's objects (field manager
 * kubefn-installer, as the Node host's installer); with `--dry-run` the API server runs every
 * admission step and stores nothing, and each object is reported as created, changed (with the
 * fields) or unchanged against what the cluster holds now.
 *
 * Caveats: a field another manager owns (a client-side `kubectl apply` before) is not removed by
 * a server-side apply when install.yaml drops it, so the dry run does not show it as changed.
 */
import type { Cluster, KubeObject } from "./cluster.ts";
import { ApiError } from "./cluster.ts";

export const FIELD_MANAGER = "kubefn-installer";

/** What applying one object does. */
export interface Change {
  object: string;
  action: "created" | "changed" | "unchanged";
  /** Changed field paths (`.spec.template.spec.containers[0].image`), for `changed`. */
  fields: string[];
}

/** Metadata the API server writes on every apply, not part of what the object says. */
const volatile = new Set(["managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"]);

/** Field paths where `after` differs from `before`, ignoring the API server's bookkeeping. */
export function changedFields(before: unknown, after: unknown, path = ""): string[] {
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    return before.flatMap((b, i) => changedFields(b, after[i], `${path}[${i}]`));
  }
  if (isObject(before) && isObject(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys]
      .sort()
      .filter((k) => !(path === ".metadata" && volatile.has(k)))
      .flatMap((k) => changedFields(before[k], after[k], `${path}.${k}`));
  }
  return [path || "."];
}

/** The {@link Change} of one object, from what the cluster holds and what the apply returned. */
export function changeOf(name: string, current: KubeObject | undefined, applied: KubeObject): Change {
  if (!current) return { object: name, action: "created", fields: [] };
  const fields = changedFields(current, applied).filter((f) => !f.startsWith(".status"));
  return { object: name, action: fields.length === 0 ? "unchanged" : "changed", fields };
}

const describe = (o: KubeObject) =>
  `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata.name}`;

/**
 * Applies `objects` in order (server-side, forced, as {@link FIELD_MANAGER}), or only dry-runs
 * them; returns what each did or would do.
 *
 * Caveats: in a dry run an object whose kind a CRD of the same install defines cannot be checked
 * until that CRD exists; it is reported as created.
 */
export async function install(
  cluster: Cluster,
  objects: KubeObject[],
  opts: { dryRun: boolean },
): Promise<Change[]> {
  const changes: Change[] = [];
  for (const o of objects) {
    const current = await cluster.get(o);
    let base: string;
    try {
      base = await cluster.pathOf(o.apiVersion, o.kind, o.metadata.namespace);
    } catch (err) {
      if (opts.dryRun && err instanceof ApiError && err.status === 404) {
        changes.push({ object: describe(o), action: "created", fields: [] });
        continue;
      }
      throw err;
    }
    const query = new URLSearchParams({ fieldManager: FIELD_MANAGER, force: "true" });
    if (opts.dryRun) query.set("dryRun", "All");
    const applied = await cluster.call<KubeObject>(
      "PATCH",
      `${base}/${encodeURIComponent(o.metadata.name)}?${query}`,
      o,
      "application/apply-patch+yaml",
    );
    changes.push(changeOf(describe(o), current, applied));
  }
  return changes;
}

/** One line per object (`created  Kind ns/name`, changed ones with their fields), then a summary. */
export function report(changes: Change[], dryRun: boolean): string {
  const lines = changes.map((c) => {
    const fields =
      c.fields.length > 0 ? `: ${c.fields.slice(0, 5).join(", ")}${c.fields.length > 5 ? ", …" : ""}` : "";
    return `${c.action.padEnd(9)} ${c.object}${fields}`;
  });
  const count = (a: Change["action"]) => changes.filter((c) => c.action === a).length;
  lines.push(
    `${dryRun ? "would be " : ""}${count("created")} created, ${count("changed")} changed, ${count("unchanged")} unchanged${dryRun ? " (dry run: nothing was written)" : ""}`,
  );
  return lines.join("\n");
}
