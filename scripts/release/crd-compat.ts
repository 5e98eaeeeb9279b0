/**
 * Whether a release's CRDs can replace the previous release's within the same API versions: a
 * structural diff of each served version's OpenAPI schema. Within an API version a schema may only
 * grow — an object stored or written by a client of the previous release must stay valid and keep
 * every field. Anything else needs a new API version (which this check leaves free).
 *
 * Incompatible: a CRD, version or field removed; a type changed; an enum narrowed; a field newly
 * required; validation added or tightened (pattern, format, bounds, lengths, counts, CEL rules,
 * enum where there was none); unknown fields no longer preserved; names or scope changed.
 */

/** The part of a CustomResourceDefinition this check reads. */
export interface Crd {
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; singular?: string; shortNames?: string[] };
    versions: Array<{ name: string; served?: boolean; schema?: { openAPIV3Schema?: Schema } }>;
  };
}

/** An OpenAPI v3 schema node, as CRDs carry them. */
export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  required?: string[];
  enum?: unknown[];
  "x-kubernetes-validations"?: Array<{ rule: string; message?: string }>;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  [keyword: string]: unknown;
}

/** Bounds that may only be lowered (a higher one rejects what was valid). */
const lowerBounds = ["minimum", "minLength", "minItems", "minProperties"];
/** Bounds that may only be raised. */
const upperBounds = ["maximum", "maxLength", "maxItems", "maxProperties"];
/** Keywords that must stay as they were, or go. */
const fixed = ["pattern", "format", "multipleOf", "exclusiveMinimum", "exclusiveMaximum", "uniqueItems"];

function compareSchemas(prev: Schema, cur: Schema, path: string, problems: string[]): void {
  const at = path || ".";
  if (prev.type !== cur.type) problems.push(`${at}: type changed from ${prev.type} to ${cur.type}`);
  for (const name of Object.keys(prev.properties ?? {})) {
    const next = cur.properties?.[name];
    if (!next) problems.push(`${path}.${name}: field removed`);
    else compareSchemas(prev.properties?.[name] as Schema, next, `${path}.${name}`, problems);
  }
  const required = new Set(prev.required ?? []);
  for (const name of cur.required ?? []) {
    if (!required.has(name)) problems.push(`${path}.${name}: newly required`);
  }
  if (cur.enum) {
    if (!prev.enum) problems.push(`${at}: enum added (${cur.enum.join(", ")})`);
    else {
      const allowed = new Set(cur.enum.map((v) => JSON.stringify(v)));
      const lost = prev.enum.filter((v) => !allowed.has(JSON.stringify(v)));
      if (lost.length > 0) problems.push(`${at}: enum narrowed (${lost.join(", ")} removed)`);
    }
  }
  for (const k of lowerBounds) {
    const [p, c] = [prev[k], cur[k]];
    if (typeof c === "number" && (typeof p !== "number" || c > p))
      problems.push(`${at}: ${k} ${p ?? "none"} → ${c}`);
  }
  for (const k of upperBounds) {
    const [p, c] = [prev[k], cur[k]];
    if (typeof c === "number" && (typeof p !== "number" || c < p))
      problems.push(`${at}: ${k} ${p ?? "none"} → ${c}`);
  }
  for (const k of fixed) {
    if (cur[k] !== undefined && JSON.stringify(cur[k]) !== JSON.stringify(prev[k])) {
      problems.push(`${at}: ${k} ${JSON.stringify(prev[k] ?? null)} → ${JSON.stringify(cur[k])}`);
    }
  }
  const rules = new Set((prev["x-kubernetes-validations"] ?? []).map((v) => v.rule));
  for (const { rule } of cur["x-kubernetes-validations"] ?? []) {
    if (!rules.has(rule)) problems.push(`${at}: validation rule added: ${rule}`);
  }
  if (prev["x-kubernetes-preserve-unknown-fields"] && !cur["x-kubernetes-preserve-unknown-fields"]) {
    problems.push(`${at}: unknown fields no longer preserved`);
  }
  if (prev.items) {
    if (!cur.items) problems.push(`${path}[]: item schema removed`);
    else compareSchemas(prev.items, cur.items, `${path}[]`, problems);
  }
  const [pa, ca] = [prev.additionalProperties, cur.additionalProperties];
  if (typeof pa === "object") {
    if (typeof ca !== "object") problems.push(`${path}{}: value schema removed`);
    else compareSchemas(pa, ca, `${path}{}`, problems);
  } else if (pa === true && ca !== true) {
    problems.push(`${path}{}: additional properties no longer allowed`);
  }
}

/**
 * Every way `current` breaks clients and stored objects of `previous`, one line each, naming the
 * CRD, the version and the field path; empty when `current` may replace `previous` in place.
 *
 * @example
 * const problems = crdIncompatibilities(loadCrds("test/fixtures/crds/0.1.0"), loadCrds("infra/crds"));
 */
export function crdIncompatibilities(previous: Crd[], current: Crd[]): string[] {
  const problems: string[] = [];
  const byName = new Map(current.map((c) => [c.metadata.name, c]));
  for (const prev of previous) {
    const name = prev.metadata.name;
    const cur = byName.get(name);
    if (!cur) {
      problems.push(`${name}: CRD removed`);
      continue;
    }
    if (cur.spec.scope !== prev.spec.scope)
      problems.push(`${name}: scope ${prev.spec.scope} → ${cur.spec.scope}`);
    for (const key of ["kind", "plural", "singular"] as const) {
      if (prev.spec.names[key] !== cur.spec.names[key]) {
        problems.push(`${name}: names.${key} ${prev.spec.names[key]} → ${cur.spec.names[key]}`);
      }
    }
    const shortNames = new Set(cur.spec.names.shortNames ?? []);
    for (const s of prev.spec.names.shortNames ?? []) {
      if (!shortNames.has(s)) problems.push(`${name}: short name ${s} removed`);
    }
    for (const version of prev.spec.versions.filter((v) => v.served !== false)) {
      const next = cur.spec.versions.find((v) => v.name === version.name);
      if (!next || next.served === false) {
        problems.push(`${name} ${version.name}: version no longer served`);
        continue;
      }
      const [p, c] = [version.schema?.openAPIV3Schema, next.schema?.openAPIV3Schema];
      if (p && c) {
        const found: string[] = [];
        compareSchemas(p, c, "", found);
        problems.push(...found.map((f) => `${name} ${version.name} ${f}`));
      } else if (p && !c) problems.push(`${name} ${version.name}: schema removed`);
    }
  }
  return problems;
}
