import { assertNever } from "../guards/index.ts";
import type { LabelSelectorRequirement } from "./labels.ts";
import { dnsSubdomain } from "./paths.ts";

/** A parsed label selector: every requirement must hold. Empty matches everything. */
export type LabelRequirements = readonly LabelSelectorRequirement[];

export type ParsedSelector = { ok: true; requirements: LabelRequirements } | { ok: false; error: string };

const nameRe = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const setRe = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/;
const equalityRe = /^([^=!\s]+)\s*(==|!=|=)\s*(\S*)$/;

/**
 * Parses the `labelSelector` query syntax of the Kubernetes API: `a=b`, `a==b`, `a!=b`,
 * `a in (x,y)`, `a notin (x)`, `a` and `!a`, joined by commas. `a=b` becomes `In [b]` and `a!=b`
 * `NotIn [b]`, so the result speaks shared/kube's {@link LabelSelectorRequirement}.
 *
 * Caveats: as in Kubernetes, `!=` and `notin` also match objects that lack the key. The numeric
 * `gt`/`lt` operators (node affinity only) are rejected.
 *
 * @example
 * parseLabelSelector("tier=fast,region in (eu,us)")
 * // { ok: true, requirements: [{ key: "tier", operator: "In", values: ["fast"] }, ...] }
 */
export function parseLabelSelector(selector: string): ParsedSelector {
  const requirements: LabelSelectorRequirement[] = [];
  if (selector.trim() === "") return { ok: true, requirements };
  for (const raw of splitTerms(selector)) {
    const term = raw.trim();
    const parsed = parseTerm(term);
    if (typeof parsed === "string") return { ok: false, error: `${parsed} in ${JSON.stringify(term)}` };
    requirements.push(parsed);
  }
  return { ok: true, requirements };
}

/** Whether `labels` satisfy every requirement. Pure. */
export function matchesRequirements(
  labels: Readonly<Record<string, string>> | undefined,
  requirements: LabelRequirements,
): boolean {
  return requirements.every((req) => {
    // Own properties only: a key like "constructor" or "__proto__" must not find Object's members.
    const value = labels && Object.hasOwn(labels, req.key) ? labels[req.key] : undefined;
    switch (req.operator) {
      case "In":
        return value !== undefined && (req.values ?? []).includes(value);
      case "NotIn":
        return value === undefined || !(req.values ?? []).includes(value);
      case "Exists":
        return value !== undefined;
      case "DoesNotExist":
        return value === undefined;
      default:
        return assertNever(req.operator);
    }
  });
}

/** Commas separate terms, except inside the parentheses of a set. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const ch = selector[i];
    if (ch === "(") depth++;
    else if (ch === ")") depth--;
    else if (ch === "," && depth === 0) {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

function parseTerm(term: string): LabelSelectorRequirement | string {
  if (term === "") return "empty requirement";
  if (term.startsWith("!")) {
    const key = term.slice(1).trim();
    return validKey(key) ?? { key, operator: "DoesNotExist" };
  }
  const set = setRe.exec(term);
  if (set) {
    const [, key = "", op, list = ""] = set;
    const values = list.split(",").map((v) => v.trim());
    if (values.length === 0 || (values.length === 1 && values[0] === "")) return "empty value set";
    for (const v of values) {
      const bad = validValue(v);
      if (bad) return bad;
    }
    return validKey(key) ?? { key, operator: op === "in" ? "In" : "NotIn", values };
  }
  const eq = equalityRe.exec(term);
  if (eq) {
    const [, key = "", op, value = ""] = eq;
    return (
      validKey(key) ?? validValue(value) ?? { key, operator: op === "!=" ? "NotIn" : "In", values: [value] }
    );
  }
  if (/[\s=!<>(),]/.test(term)) return "unparsable requirement";
  return validKey(term) ?? { key: term, operator: "Exists" };
}

function validKey(key: string): string | undefined {
  const slash = key.indexOf("/");
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix))) {
    return `invalid label key prefix ${JSON.stringify(prefix)}`;
  }
  if (name.length > 63 || !nameRe.test(name)) return `invalid label key ${JSON.stringify(key)}`;
  return undefined;
}

function validValue(value: string): string | undefined {
  if (value === "") return undefined;
  if (value.length > 63 || !nameRe.test(value)) return `invalid label value ${JSON.stringify(value)}`;
  return undefined;
}
