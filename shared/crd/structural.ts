import type { JsonSchemaProps } from "./schema.ts";

const junctors = ["allOf", "anyOf", "oneOf", "not"] as const;
const forbiddenInJunctors = ["description", "type", "default", "additionalProperties", "nullable"] as const;
const types = new Set(["object", "array", "string", "integer", "number", "boolean"]);

/**
 * Lists every way `schema` (a CRD version's `openAPIV3Schema`) breaks the structural-schema rules
 * of apiextensions.k8s.io/v1, plus the checks kubefn wants on top (RE2-compatible patterns,
 * well-formed map-lists and CEL entries). An empty list means the API server will accept it.
 *
 * Rules checked: a non-empty `type` on the root, every property, every additionalProperties and
 * every items node (unless `x-kubernetes-preserve-unknown-fields` or `x-kubernetes-int-or-string`);
 * no `$ref`/`definitions`; `additionalProperties` only as a schema and never beside `properties`;
 * no type/description/default/nullable/additionalProperties inside allOf/anyOf/oneOf/not;
 * `metadata` at the root only as `{type: object}`, with at most `name` and `generateName` as
 * `{type: string}` properties (a root CEL rule's `fieldPath: .metadata.name` needs the path);
 * `x-kubernetes-list-map-keys` only on a
 * `map` list whose items require (or default) each key.
 */
export function structuralViolations(schema: JsonSchemaProps): string[] {
  const out: string[] = [];
  check(schema, "", out, { root: true });
  return out;
}

function check(node: JsonSchemaProps, path: string, out: string[], opts: { root?: boolean }): void {
  const at = path === "" ? "<root>" : path;
  if (typeof node !== "object" || node === null || Array.isArray(node)) {
    out.push(`${at}: schema is not an object`);
    return;
  }
  const preserve = node["x-kubernetes-preserve-unknown-fields"];
  const intOrString = node["x-kubernetes-int-or-string"] === true;
  if (preserve !== undefined && preserve !== true)
    out.push(`${at}: x-kubernetes-preserve-unknown-fields must be true`);
  if (node.type === undefined) {
    if (preserve !== true && !intOrString) out.push(`${at}: missing type`);
  } else if (!types.has(node.type)) {
    out.push(`${at}: unknown type ${JSON.stringify(node.type)}`);
  }
  if (opts.root && node.type !== "object") out.push(`${at}: root must be type object`);
  for (const key of [
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "patternProperties",
    "dependencies",
    "additionalItems",
  ]) {
    if (key in node) out.push(`${at}: "${key}" is not allowed`);
  }
  if ("additionalProperties" in node) {
    const ap = node.additionalProperties as unknown;
    if (typeof ap !== "object" || ap === null) out.push(`${at}: additionalProperties must be a schema`);
    if (node.properties !== undefined)
      out.push(`${at}: properties and additionalProperties are mutually exclusive`);
  }
  if (node.type === "array" && node.items === undefined && preserve !== true) {
    out.push(`${at}: array without items`);
  }
  if (node.items !== undefined && Array.isArray(node.items)) out.push(`${at}: items must be a single schema`);
  if (typeof node.pattern === "string") {
    const problem = re2Problem(node.pattern);
    if (problem !== undefined) out.push(`${at}: pattern ${problem}`);
  }
  if (node.enum !== undefined && (!Array.isArray(node.enum) || node.enum.length === 0)) {
    out.push(`${at}: enum must be a non-empty list`);
  }
  if (node.required !== undefined && node.properties !== undefined) {
    for (const name of node.required) {
      if (!(name in node.properties)) out.push(`${at}: required field "${name}" is not a property`);
    }
  }
  checkListType(node, at, out);
  checkValidations(node, at, out);

  for (const junctor of junctors) {
    const value = node[junctor];
    if (value === undefined) continue;
    const branches = (Array.isArray(value) ? value : [value]) as JsonSchemaProps[];
    for (const [i, branch] of branches.entries())
      checkJunctorBranch(branch, node, `${at}.${junctor}[${i}]`, out);
  }

  if (node.properties !== undefined) {
    for (const [name, child] of Object.entries(node.properties)) {
      const childPath = `${path}.${name}`;
      if (opts.root && name === "metadata") {
        checkMetadata(child, childPath, out);
        continue;
      }
      check(child, childPath, out, {});
    }
  }
  if (node.additionalProperties !== undefined && typeof node.additionalProperties === "object") {
    check(node.additionalProperties, `${path}.*`, out, {});
  }
  if (node.items !== undefined && !Array.isArray(node.items)) check(node.items, `${path}[*]`, out, {});
}

function checkMetadata(node: JsonSchemaProps, path: string, out: string[]): void {
  const keys = Object.keys(node).filter((k) => k !== "type" && k !== "properties");
  const properties = Object.entries(node.properties ?? {});
  const onlyNames = properties.every(
    ([name, child]) =>
      (name === "name" || name === "generateName") &&
      child.type === "string" &&
      Object.keys(child).length === 1,
  );
  if (node.type !== "object" || keys.length > 0 || !onlyNames) {
    out.push(
      `${path}: metadata must be exactly {type: object}, at most with name and generateName of {type: string} (got ${JSON.stringify(node)})`,
    );
  }
}

function checkJunctorBranch(
  branch: JsonSchemaProps,
  parent: JsonSchemaProps,
  path: string,
  out: string[],
): void {
  if (parent["x-kubernetes-int-or-string"] === true && isIntOrStringBranch(branch)) return;
  for (const key of forbiddenInJunctors) {
    if (key in branch) out.push(`${path}: "${key}" is not allowed inside a logical junctor`);
  }
  for (const name of Object.keys(branch.properties ?? {})) {
    if (parent.properties?.[name] === undefined) {
      out.push(`${path}: property "${name}" must also be specified outside the junctor`);
    }
  }
  if (branch.items !== undefined && parent.items === undefined) {
    out.push(`${path}: items must also be specified outside the junctor`);
  }
}

/** `{type: integer}` or `{type: string}`: the two branches allowed under x-kubernetes-int-or-string. */
function isIntOrStringBranch(branch: JsonSchemaProps): boolean {
  const keys = Object.keys(branch);
  return keys.length === 1 && (branch.type === "integer" || branch.type === "string");
}

function checkListType(node: JsonSchemaProps, at: string, out: string[]): void {
  const listType = node["x-kubernetes-list-type"];
  const keys = node["x-kubernetes-list-map-keys"];
  if (listType !== undefined && node.type !== "array")
    out.push(`${at}: x-kubernetes-list-type on a non-array`);
  if (keys === undefined) {
    if (listType === "map") out.push(`${at}: a map list needs x-kubernetes-list-map-keys`);
    return;
  }
  if (listType !== "map") out.push(`${at}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map`);
  const items = node.items;
  if (items?.type !== "object") {
    out.push(`${at}: a map list's items must be objects`);
    return;
  }
  for (const key of keys) {
    const prop = items.properties?.[key];
    if (prop === undefined) out.push(`${at}: map key "${key}" is not a property of the items`);
    else if (!(items.required ?? []).includes(key) && prop.default === undefined) {
      out.push(`${at}: map key "${key}" must be required or defaulted`);
    }
  }
}

function checkValidations(node: JsonSchemaProps, at: string, out: string[]): void {
  const rules = node["x-kubernetes-validations"];
  if (rules === undefined) return;
  if (!Array.isArray(rules)) {
    out.push(`${at}: x-kubernetes-validations must be a list`);
    return;
  }
  for (const [i, rule] of rules.entries()) {
    if (typeof rule?.rule !== "string" || rule.rule.trim() === "") {
      out.push(`${at}: x-kubernetes-validations[${i}] needs a rule`);
    }
  }
}

/**
 * Go's regexp (RE2) has no lookaround and no backreferences; the API server rejects a CRD whose
 * pattern uses them.
 */
function re2Problem(pattern: string): string | undefined {
  if (/\(\?<?[=!]/.test(pattern)) return "uses lookaround, which RE2 does not support";
  if (/\\[1-9]/.test(pattern)) return "uses a backreference, which RE2 does not support";
  try {
    new RegExp(pattern, "u");
  } catch (error) {
    return `does not compile: ${(error as Error).message}`;
  }
  return undefined;
}
