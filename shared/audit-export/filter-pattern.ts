import type { Registry } from "../runtime/index.ts";
import { MAPPED_SUBRESOURCES, WRITE_VERBS } from "../runtime/index.ts";

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
 * The plural resources whose status writes some controller takes readiness from
 * (`readinessFrom`: a SubPool's StatefulSet, a Site component's Deployment), sorted.
 */
export function readinessResources(registry: Registry): string[] {
  return [
    ...new Set(registry.controllers.flatMap((c) => (c.readinessFrom ?? []).map((r) => r.resource))),
  ].sort();
}

/**
 * The CloudWatch Logs subscription filter pattern for an EKS cluster's log group that passes only
 * what the audit mapping can use: audit events (JSON) at stage ResponseComplete, with a write
 * verb, on a resource some controller needs, and not on a subresource other than the mapped ones
 * (so the status writes of every controller in the cluster never invoke the function) — but for
 * the status writes of the kinds a controller takes readiness from. The mapping still applies
 * every rule; the filter only saves invocations.
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
  const readiness = readinessResources(registry);
  const statusWrites =
    readiness.length === 0
      ? ""
      : ` || ($.objectRef.subresource = "status" && ${any("$.objectRef.resource", readiness)})`;
  const clauses = [
    `($.stage = "ResponseComplete")`,
    any("$.verb", WRITE_VERBS),
    any("$.objectRef.resource", registryResources(registry)),
    `($.objectRef.subresource NOT EXISTS || ${any("$.objectRef.subresource", MAPPED_SUBRESOURCES).slice(1, -1)}${statusWrites})`,
  ];
  return `{ ${clauses.join(" && ")} }`;
}

/**
 * The Cloud Logging filter for a Log Router sink that routes a GKE cluster's audit entries to
 * Pub/Sub: Admin Activity entries of service `k8s.io` from that cluster whose `methodName` is a
 * write on a resource the registry needs (optionally through a mapped subresource), or a status
 * write of a kind a controller takes readiness from, and nothing else — other status writes,
 * other resources and other services stay out of the topic.
 *
 * @example
 * gkeAuditLogFilter(registry, { project: "p", cluster: "prod" })
 */
export function gkeAuditLogFilter(registry: Registry, where: { project: string; cluster: string }): string {
  const resources = registryResources(registry).join("|");
  const subresources = [...MAPPED_SUBRESOURCES].join("|");
  const verbs = [...WRITE_VERBS].join("|");
  const readiness = readinessResources(registry);
  const statusWrites = readiness.length === 0 ? "" : `|(${readiness.join("|")})\\.status`;
  return [
    `logName="projects/${where.project}/logs/cloudaudit.googleapis.com%2Factivity"`,
    `resource.type="k8s_cluster"`,
    `resource.labels.cluster_name="${where.cluster}"`,
    `protoPayload.serviceName="k8s.io"`,
    `protoPayload.methodName=~"\\.((${resources})(\\.(${subresources}))?${statusWrites})\\.(${verbs})$"`,
  ].join(" AND ");
}
