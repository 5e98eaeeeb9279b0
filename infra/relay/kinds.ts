import * as z from "zod";
import { assertNever } from "../../shared/guards/index.ts";
import type { Resource } from "../../shared/kube/index.ts";
import { Resources } from "../../shared/kube/index.ts";
import { type Registry, resourceKey } from "../../shared/runtime/index.ts";
import { type Predicate, payloadChanges, readinessChanges, specChanges } from "./predicates.ts";

/**
 * Which edges of a kind the relay forwards: `spec` (create, delete, generation change, deletion
 * start) for primary and owned kinds; `readiness` (`spec`, and a change of what the status says
 * of readiness) for owned kinds a controller takes readiness from (`readinessFrom`); `payload`
 * (create, delete, data change) for configuration objects a controller watches.
 */
export type PredicateKind = "spec" | "readiness" | "payload";

/** One kind the relay list-watches. */
export interface RelayKind {
  resource: Resource;
  predicate: PredicateKind;
}

/** The predicate behind a {@link PredicateKind}. */
export function predicateFor(kind: PredicateKind): Predicate {
  switch (kind) {
    case "spec":
      return specChanges;
    case "readiness":
      return readinessChanges;
    case "payload":
      return payloadChanges;
    default:
      return assertNever(kind);
  }
}

/** Kinds whose meaning is their `data`: a watch on them forwards payload changes. */
const PAYLOAD_KINDS = new Set([resourceKey(Resources.ConfigMap), resourceKey(Resources.Secret)]);

/**
 * The kinds the relay must watch for `registry`: ConfigMaps and Secrets with the `payload`
 * predicate, whether owned or watched (they have no generation, so `spec` would only see create
 * and delete, and miss a rotated cloud-init Secret); every other kind with `spec`. A kind listed
 * by several controllers is watched once.
 *
 * @example
 * relayKindsFor(createRegistry([proxyController(deps)]))
 * // [{ resource: proxyResource, predicate: "spec" }, { resource: Resources.Secret, predicate: "payload" }]
 */
export function relayKindsFor(registry: Registry): RelayKind[] {
  return relayKindsOf(
    registry.controllers.flatMap((c) => [
      c.for,
      ...(c.owns ?? []),
      ...(c.watches ?? []).map((w) => w.resource),
    ]),
    registry.controllers.flatMap((c) => c.readinessFrom ?? []),
  );
}

/**
 * {@link relayKindsFor} over a plain list of kinds (e.g. the static `controllerKinds`), in order,
 * once each; `readiness`: the kinds some controller takes readiness from.
 */
export function relayKindsOf(
  resources: readonly Resource[],
  readiness: readonly Resource[] = [],
): RelayKind[] {
  const ready = new Set(readiness.map(resourceKey));
  const kinds = new Map<string, RelayKind>();
  for (const resource of resources) {
    const key = resourceKey(resource);
    if (kinds.has(key)) continue;
    const predicate = PAYLOAD_KINDS.has(key) ? "payload" : ready.has(key) ? "readiness" : "spec";
    kinds.set(key, { resource, predicate });
  }
  return [...kinds.values()];
}

/**
 * The kinds the relay watches for the operators' declared kinds (`controllerKinds`), without
 * building them. Secrets are left out: the relay's identity may not list Secrets (its ClusterRole,
 * generated from the same list by `npm run gen:cluster`). A rotated cloud-init or credential
 * Secret is picked up by the drift pass instead.
 */
export function relayKindsOfOperators(
  operators: readonly { kinds: readonly Resource[]; readinessFrom?: readonly Resource[] }[],
): RelayKind[] {
  return relayKindsOf(
    operators.flatMap((c) => c.kinds),
    operators.flatMap((c) => c.readinessFrom ?? []),
  ).filter((k) => !(k.resource.group === "" && k.resource.resource === "secrets"));
}

/** A {@link RelayKind} as configuration gives it (`KUBEFN_RELAY_KINDS`, JSON). */
export const relayKindSchema = z.object({
  group: z.string(),
  version: z.string().min(1),
  resource: z.string().min(1),
  kind: z.string().min(1),
  namespaced: z.boolean(),
  predicate: z.enum(["spec", "readiness", "payload"]),
});

export function relayKindFromConfig(entry: z.infer<typeof relayKindSchema>): RelayKind {
  const { predicate, ...resource } = entry;
  return { resource, predicate };
}
