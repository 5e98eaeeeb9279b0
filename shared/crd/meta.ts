import * as z from "../zod/index.ts";

/** One `x-kubernetes-validations` entry: a CEL rule evaluated by the API server on admission. */
export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  /** e.g. "FieldValueForbidden"; defaults to FieldValueInvalid on the server. */
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  fieldPath?: string;
  /** Kubernetes ≥ 1.30: evaluate transition rules (`oldSelf`) only when the old value exists. */
  optionalOldSelf?: boolean;
}

/**
 * `schema` with JSON Schema metadata (zod classic's `.meta(m)`, for zod/mini): a clone, registered
 * in zod's global registry, whose metadata extends the original's.
 */
export function withMeta<T extends z.ZodMiniType>(schema: T, meta: z.core.GlobalMeta): T {
  const clone = schema.clone() as T;
  z.globalRegistry.add(clone, meta);
  return clone;
}

/** What the generated CRD says about one field: a description, CEL rules, list semantics. */
export type FieldNote =
  | string
  | {
      description?: string;
      cel?: readonly CelRule[];
      /** A list merged by these keys (`x-kubernetes-list-type: map`), as server-side apply does. */
      listMapKeys?: readonly string[];
      /** A CRD bound tighter than the runtime schema's, which still parses what older CRDs stored. */
      maximum?: number;
    };

/**
 * `schema` with CRD-only notes (descriptions, CEL rules, list keys) on the fields at given paths, for
 * `npm run gen:crds`: the runtime schema stays free of text only the API server and `kubectl
 * explain` read, and out of the Worker bundle. A path names object fields, dot-separated
 * ("cloudInit.secretRef.name"); optional, defaulted and array nodes are walked through; `""` is
 * the schema itself. The runtime schema is not changed: the annotated nodes are clones.
 *
 * @example
 * const spec = documented(proxySpecSchema, { provider: "Provider name.", "endpoint.host": "Host." });
 */
export function documented<T extends z.ZodMiniType>(
  schema: T,
  notes: Readonly<Record<string, FieldNote>>,
): T {
  let out: z.ZodMiniType = schema;
  for (const [path, note] of Object.entries(notes)) {
    out = notedAt(out, path === "" ? [] : path.split("."), note, path);
  }
  return out as T;
}

function notedAt(
  schema: z.ZodMiniType,
  path: readonly string[],
  note: FieldNote,
  full: string,
): z.ZodMiniType {
  if (path.length === 0) {
    const {
      description,
      cel = [],
      listMapKeys,
      maximum,
    } = typeof note === "string" ? { description: note } : note;
    const existing =
      (z.globalRegistry.get(schema)?.["x-kubernetes-validations"] as CelRule[] | undefined) ?? [];
    return withMeta(schema, {
      ...(description === undefined ? {} : { description }),
      ...(maximum === undefined ? {} : { maximum }),
      ...(cel.length === 0 ? {} : { "x-kubernetes-validations": [...existing, ...cel] }),
      ...(listMapKeys === undefined
        ? {}
        : { "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [...listMapKeys] }),
    });
  }
  const def = schema._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
  const [name, ...rest] = path as [string, ...string[]];
  let changed: Record<string, unknown>;
  switch (def.type) {
    case "optional":
    case "default":
    case "nullable":
      changed = { innerType: notedAt(def.innerType as z.ZodMiniType, path, note, full) };
      break;
    case "array":
      changed = { element: notedAt(def.element as z.ZodMiniType, path, note, full) };
      break;
    case "object": {
      const shape = def.shape as Record<string, z.ZodMiniType>;
      const field = shape[name];
      if (field === undefined) throw new Error(`documented: no field "${name}" on the way to "${full}"`);
      changed = { shape: { ...shape, [name]: notedAt(field, rest, note, full) } };
      break;
    }
    default:
      throw new Error(`documented: cannot walk into a ${def.type} node on the way to "${full}"`);
  }
  // A clone with a new def has no parent to inherit metadata from: carry it over.
  const clone = schema.clone(z.core.util.mergeDefs(def, changed) as typeof def);
  const meta = z.globalRegistry.get(schema);
  if (meta !== undefined) z.globalRegistry.add(clone, meta);
  return clone;
}
