import { MAPPED_SUBRESOURCES, WRITE_VERBS } from "../runtime/event-mapping.ts";
import type { Registry } from "../runtime/registry.ts";

/** CloudWatch Logs caps a filter pattern at 1024 characters. */
export const MAX_FILTER_PATTERN_LENGTH = 1024;

/** The plural resources the registry maps from: every `for`, `owns` and `watches` kind, sorted. */
export function registryResources(registry: Registry): string[] {
  const resources = new Set<string>();
  for (const c of registry.controllers) {
    resources.add(c.for.resource);
    for (const o of c.owns ?? []) resources.add(o.resource);
    for (const w of c.watches ?? []) resources.add(w.resource.resource);
  }
  return [...resources].sort();
}

/**
 * The CloudWatch Logs subscription filter pattern for an EKS cluster's log group that passes only
 * what the audit mapping can use: audit events (JSON) at stage ResponseComplete, with a write
 * verb, on a resource some controller needs, and not on a subresource other than the mapped ones
 * (so the status writes of every controller in the cluster never invoke the function). The
 * mapping still applies every rule; the filter only saves invocations.
 *
 * Caveats: resources are matched by plural name only (the pattern would outgrow its 1024
 * characters with groups), so `secrets` passes for any group; the mapping drops the rest.
 *
 * @example
 * eksAuditFilterPattern(createOperators({ … }).registry)
 * // '{ ($.stage = "ResponseComplete") && ($.verb = "create" || …) && … }'
 */
export function eksAuditFilterPattern(registry: Registry): string {
  const any = (field: string, values: Iterable<string>) =>
    `(${[...values].map((v) => `${field} = "${v}"`).join(" || ")})`;
  const clauses = [
    `($.stage = "ResponseComplete")`,
    any("$.verb", WRITE_VERBS),
    any("$.objectRef.resource", registryResources(registry)),
    `($.objectRef.subresource NOT EXISTS || ${any("$.objectRef.subresource", MAPPED_SUBRESOURCES).slice(1, -1)})`,
  ];
  return `{ ${clauses.join(" && ")} }`;
}
