import * as z from "../zod/index.ts";
import { type CelRule, withMeta } from "./meta.ts";

export type { CelRule };

/**
 * An OpenAPI v3 schema node as the apiextensions.k8s.io/v1 API accepts it (JSONSchemaProps).
 * Only the keys kubefn emits are typed; the rest of JSONSchemaProps is reachable as unknown.
 */
export interface JsonSchemaProps {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  format?: string;
  default?: unknown;
  enum?: unknown[];
  nullable?: boolean;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  required?: string[];
  properties?: Record<string, JsonSchemaProps>;
  additionalProperties?: JsonSchemaProps;
  items?: JsonSchemaProps;
  "x-kubernetes-preserve-unknown-fields"?: true;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
  "x-kubernetes-validations"?: CelRule[];
  [key: string]: unknown;
}

/**
 * Attaches CEL rules to a zod node; they land in that node's `x-kubernetes-validations` in the
 * generated CRD. Rules already attached (by an earlier `withCel` or `.meta()`) are kept.
 *
 * @example
 * const storage = z.object({
 *   size: withCel(quantity, [{ rule: "self == oldSelf", message: "storage.size is immutable" }]),
 * });
 *
 * Caveats: the rule only runs in the API server. When the reconciler must rely on the same
 * invariant after `safeParse`, add the equivalent zod `.refine` too.
 */
export function withCel<T extends z.ZodMiniType>(schema: T, rules: readonly CelRule[]): T {
  const existing =
    (z.globalRegistry.get(schema)?.["x-kubernetes-validations"] as CelRule[] | undefined) ?? [];
  return withMeta(schema, { "x-kubernetes-validations": [...existing, ...rules] });
}

/** Keys of JSONSchemaProps that kubefn passes through unchanged once a node is made structural. */
const passThroughKeys = new Set([
  "type",
  "description",
  "title",
  "format",
  "default",
  "enum",
  "nullable",
  "pattern",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minItems",
  "maxItems",
  "uniqueItems",
  "minProperties",
  "maxProperties",
  "required",
  "example",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-int-or-string",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-validations",
]);

/** Keys zod emits that Kubernetes has no use for (or rejects); they are dropped silently. */
const droppedKeys = new Set([
  "$schema",
  "$id",
  "id",
  "$defs",
  "definitions",
  "readOnly",
  "writeOnly",
  "deprecated",
]);

/**
 * Formats the API server validates itself; zod's own regex for these is dropped, because zod's
 * patterns use syntax (lookahead) that Go's RE2 rejects and they would only restate the format.
 */
const kubeFormats = new Set([
  "bsonobjectid",
  "uri",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "cidr",
  "mac",
  "uuid",
  "uuid3",
  "uuid4",
  "uuid5",
  "isbn",
  "isbn10",
  "isbn13",
  "creditcard",
  "ssn",
  "hexcolor",
  "rgbcolor",
  "byte",
  "password",
  "date",
  "duration",
  "datetime",
  "date-time",
  "int32",
  "int64",
  "float",
  "double",
]);

type Raw = Record<string, unknown>;

/** Thrown when a zod schema uses a construct a structural CRD schema cannot express. */
export class UnstructuralSchemaError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`${path || "<root>"}: ${detail}`);
    this.name = "UnstructuralSchemaError";
  }
}

/**
 * Converts a zod schema into a structural OpenAPI v3 schema for a CRD version.
 *
 * zod's own `z.toJSONSchema` (OpenAPI 3.0 target, input side so defaulted fields are optional)
 * does the type mapping; a post-pass then makes the result structural: `$ref`s are inlined,
 * unions of literals become one `enum`, free-form values (`z.unknown()`, `z.record(k, z.unknown())`)
 * become `x-kubernetes-preserve-unknown-fields`, zod's safe-integer bounds and format regexes are
 * dropped, and anything left over that Kubernetes cannot express raises an
 * {@link UnstructuralSchemaError} naming the path.
 *
 * Caveats: zod refinements (`.refine`, `.superRefine`) do not appear in the output; express the
 * server-side equivalent with {@link withCel}. Unions of objects are rejected: model them as one
 * object with optional fields and an "exactly one" CEL rule.
 */
export function structuralSchemaOf(schema: z.ZodMiniType): JsonSchemaProps {
  const raw = z.toJSONSchema(schema, {
    target: "openapi-3.0",
    io: "input",
    unrepresentable: "throw",
    reused: "inline",
    cycles: "throw",
    // A zod union of one integer and one string is int-or-string. Decided on the zod node, so a
    // tuple of the same two types (an array of their union to JSON Schema) is still refused.
    override: ({ zodSchema, jsonSchema }) => {
      if (zodSchema._zod.def.type === "union" && isIntOrStringUnion(jsonSchema.anyOf)) {
        (jsonSchema as Raw)["x-kubernetes-int-or-string"] = true;
      }
    },
  }) as Raw;
  const defs = { ...(raw.definitions as Raw | undefined), ...(raw.$defs as Raw | undefined) };
  return structural(raw, "", { root: raw, defs, resolving: new Set() });
}

interface Context {
  root: Raw;
  defs: Raw;
  resolving: Set<string>;
}

function structural(node: Raw, path: string, ctx: Context): JsonSchemaProps {
  let current = resolveRef(node, path, ctx);
  current = collapseUnion(current, path);
  if ("const" in current) {
    const { const: value, ...rest } = current;
    current = { ...rest, enum: [value] };
  }

  const out: JsonSchemaProps = {};
  for (const [key, value] of Object.entries(current)) {
    if (droppedKeys.has(key)) continue;
    if (key === "examples") {
      if (Array.isArray(value) && value.length > 0) out.example = value[0];
      continue;
    }
    if (key === "properties") {
      const props: Record<string, JsonSchemaProps> = {};
      for (const [name, child] of Object.entries(value as Raw)) {
        props[name] = structural(child as Raw, `${path}.${name}`, ctx);
      }
      out.properties = props;
      continue;
    }
    if (key === "items") {
      if (Array.isArray(value)) throw new UnstructuralSchemaError(path, "tuples are not structural");
      out.items = structural(value as Raw, `${path}[*]`, ctx);
      continue;
    }
    if (key === "additionalProperties") {
      if (value === false) continue;
      if (value === true || isEmptySchema(value as Raw)) {
        out["x-kubernetes-preserve-unknown-fields"] = true;
        continue;
      }
      out.additionalProperties = structural(value as Raw, `${path}.*`, ctx);
      continue;
    }
    if (key === "propertyNames") continue;
    if (key === "type" && Array.isArray(value)) {
      throw new UnstructuralSchemaError(path, `a node must have exactly one type, got ${value.join("|")}`);
    }
    if (key === "anyOf" && current["x-kubernetes-int-or-string"] === true) {
      out.anyOf = value;
      continue;
    }
    if (key === "prefixItems" || key === "allOf" || key === "anyOf" || key === "oneOf" || key === "not") {
      throw new UnstructuralSchemaError(path, `"${key}" is not supported here; see structuralSchemaOf`);
    }
    if (!passThroughKeys.has(key)) {
      throw new UnstructuralSchemaError(path, `"${key}" has no equivalent in a CRD schema`);
    }
    out[key] = value;
  }

  if (out.type === "integer") {
    if (out.minimum === Number.MIN_SAFE_INTEGER) delete out.minimum;
    if (out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
  }
  if (out.format !== undefined && out.pattern !== undefined && kubeFormats.has(out.format)) {
    delete out.pattern;
  }
  if (out.format !== undefined && !kubeFormats.has(out.format)) {
    delete out.format;
  }
  if (out.type === undefined && out["x-kubernetes-int-or-string"] !== true) {
    if (out.properties !== undefined || out.additionalProperties !== undefined) out.type = "object";
    else out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  return canonicalOrder(out);
}

/** Key order of every emitted node, so the YAML reads the same however the zod schema was built. */
const keyOrder = [
  "description",
  "title",
  "type",
  "format",
  "enum",
  "default",
  "nullable",
  "minimum",
  "exclusiveMinimum",
  "maximum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "uniqueItems",
  "minProperties",
  "maxProperties",
  "anyOf",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "example",
];

function canonicalOrder(node: JsonSchemaProps): JsonSchemaProps {
  const rank = (key: string) => {
    const i = keyOrder.indexOf(key);
    return i === -1 ? keyOrder.length : i;
  };
  const keys = Object.keys(node).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(keys.map((k) => [k, node[k]])) as JsonSchemaProps;
}

function isEmptySchema(node: Raw): boolean {
  return Object.keys(node).every((k) => k === "description");
}

function resolveRef(node: Raw, path: string, ctx: Context): Raw {
  const ref = node.$ref;
  if (typeof ref !== "string") return node;
  if (ctx.resolving.has(ref)) throw new UnstructuralSchemaError(path, `recursive schema via ${ref}`);
  let target: Raw | undefined;
  if (ref === "#") target = ctx.root;
  const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(ref);
  if (match?.[1] !== undefined) target = ctx.defs[decodeURIComponent(match[1])] as Raw | undefined;
  if (target === undefined) throw new UnstructuralSchemaError(path, `unresolvable ${ref}`);
  ctx.resolving.add(ref);
  try {
    const { $ref: _, ...siblings } = node;
    return { ...resolveRef(target, path, ctx), ...siblings };
  } finally {
    ctx.resolving.delete(ref);
  }
}

/**
 * Rewrites the unions structural schemas can express: literals of one type become an `enum`, a
 * `null` branch becomes `nullable`, a single remaining branch merges into its parent.
 */
function collapseUnion(node: Raw, path: string): Raw {
  const key = "anyOf" in node ? "anyOf" : "oneOf" in node ? "oneOf" : undefined;
  if (key === undefined) return node;
  const { [key]: branchesValue, ...rest } = node;
  if (rest["x-kubernetes-int-or-string"] === true) return intOrString(branchesValue as Raw[], rest, path);
  const branches = (branchesValue as Raw[]).map((b) => ("const" in b ? { ...b, enum: [b.const] } : b));
  const nonNull = branches.filter((b) => !isNullBranch(b));
  const out: Raw = nonNull.length < branches.length ? { ...rest, nullable: true } : { ...rest };
  if (nonNull.length === 1) return { ...nonNull[0], ...out };
  const types = new Set(nonNull.map((b) => b.type));
  const allEnums = nonNull.every(
    (b) => Array.isArray(b.enum) && Object.keys(b).every((k) => isEnumBranchKey(k)),
  );
  if (allEnums && types.size === 1) {
    const values = [...new Set(nonNull.flatMap((b) => b.enum as unknown[]))];
    return { ...out, type: nonNull[0]?.type, enum: values };
  }
  throw new UnstructuralSchemaError(
    path,
    "unions other than literals of one type are not structural; use one object with optional fields and a CEL rule",
  );
}

/** JSON Schema branches of one integer and one string: `z.union([z.int(), z.string()])`. */
function isIntOrStringUnion(branches: unknown): boolean {
  if (!Array.isArray(branches) || branches.length !== 2) return false;
  const types = branches.map((b: Raw) => b.type);
  return types.includes("integer") && types.includes("string");
}

/**
 * `z.union([z.int(), z.string()])` (a resource.Quantity or an IntOrString port), marked
 * `x-kubernetes-int-or-string`: the one junctor shape structural schemas allow. A string pattern
 * moves up to the node, where the API server applies it to string values only.
 */
function intOrString(branches: Raw[], rest: Raw, path: string): Raw {
  const integer = branches.find((b) => b.type === "integer");
  const string = branches.find((b) => b.type === "string");
  if (branches.length !== 2 || integer === undefined || string === undefined) {
    throw new UnstructuralSchemaError(
      path,
      "x-kubernetes-int-or-string needs a union of one integer and one string",
    );
  }
  const out: Raw = { ...rest, anyOf: [{ type: "integer" }, { type: "string" }] };
  if (typeof string.pattern === "string") out.pattern = string.pattern;
  return out;
}

/** zod's OpenAPI 3.0 rendering of `z.null()` is `{type, nullable: true, enum: [null]}`. */
function isNullBranch(branch: Raw): boolean {
  if (branch.type === "null") return true;
  return Array.isArray(branch.enum) && branch.enum.length === 1 && branch.enum[0] === null;
}

function isEnumBranchKey(key: string): boolean {
  return key === "type" || key === "enum" || key === "const" || key === "description";
}
