/**
 * The SubPool API (subrelay.example.com/v1alpha1): a cluster-scoped pool that derives the
 * Namespace `subpool-<name>` and the objects inside it. Static rules (enums, required fields, the
 * name format, storage.size immutability, CPU and memory on both containers) live here and reach
 * the API server through the generated CRD; dynamic rules (budget envelope, ownership) are
 * conditions with the reasons below.
 */

import {
  conditionsSchema,
  type KindSpec,
  objectSchemaFor,
  quantitySchema,
  resourceFor,
} from "../../crd/index.ts";
import type { KubeObject, Resource } from "../../kube/index.ts";
import { dnsLabel, dnsSubdomain } from "../../kube/index.ts";
import type { FinalizerDeclaration } from "../../runtime/index.ts";
import * as z from "../../zod/index.ts";

export const subPoolGroup = "subrelay.example.com";
export const subPoolVersion = "v1alpha1";

/** Held until the derived Namespace is gone (or was never ours). */
export const subPoolFinalizer = "subrelay.example.com/finalizer";

/** Prefix of the derived Namespace: SubPool "demo-pool" owns Namespace "subpool-demo-pool". */
export const subPoolNamespacePrefix = "subpool-";

/**
 * Longest SubPool name (the SubPool ID). Derived names add prefixes and suffixes
 * ("subpool-<id>", "<id>-cpa-manager-0"), and a Namespace name is a DNS label of at most 63.
 */
export const subPoolNameMaxLength = 40;

/** Label on every object a SubPool derives; the Namespace must carry it to count as ours. */
export const subPoolManagedLabel = "app.kubernetes.io/managed-by";
export const subPoolManagedValue = "subpool-operator";
/** Label naming the SubPool an object belongs to; the Namespace must carry it to count as ours. */
export const subPoolPoolLabel = "subrelay.example.com/pool";

/** The Namespace a SubPool derives. */
export function subPoolNamespaceName(subPoolName: string): string {
  return `${subPoolNamespacePrefix}${subPoolName}`;
}

/** Condition types on `status.conditions`. */
export const SubPoolConditionType = {
  /** Everything the pool needs exists and reports ready. */
  Ready: "Ready",
  /** The shared proxy gateway (Mihomo) has a ready endpoint; Unknown while suspended. */
  ProxyGatewayReady: "ProxyGatewayReady",
  /** Gateway mode: the HTTPRoute is accepted by its Gateway. */
  RouteReady: "RouteReady",
  /** spec.suspend is true: workloads scaled to zero, route removed, data kept. */
  Suspended: "Suspended",
  /**
   * True while the pool runs above the current resource envelope (SUBPOOL_MAX_CPU/MEMORY lowered
   * after it was admitted): it keeps running and stays Ready, and growth is refused. Absent
   * otherwise.
   */
  AboveEnvelope: "AboveEnvelope",
} as const;
export type SubPoolConditionType = (typeof SubPoolConditionType)[keyof typeof SubPoolConditionType];

/** Stable condition reasons. */
export const SubPoolReason = {
  /** A Namespace of the derived name exists and is not controlled by this SubPool. */
  NamespaceConflict: "NamespaceConflict",
  /** The credential Secret exists and is not controlled by this SubPool. */
  CredentialConflict: "CredentialConflict",
  /** Another managed object exists and is not controlled by this SubPool. */
  ManagedResourceConflict: "ManagedResourceConflict",
  /** Deletion is waiting on the Namespace (finalizers, PVCs, a Forbidden delete). */
  DeletionBlocked: "DeletionBlocked",
  Suspended: "Suspended",
  /** The operator configuration ConfigMap exists but cannot be parsed. */
  InvalidOperatorConfig: "InvalidOperatorConfig",
  /** Gateway mode without a Gateway or a hostname, from the spec or the operator configuration. */
  GatewayConfigIncomplete: "GatewayConfigIncomplete",
  /** The SubPool ID, an image, a resource request or the storage size is invalid. */
  InvalidSpec: "InvalidSpec",
  /** cpa + cpaManager requests exceed the platform envelope of the operator configuration. */
  ResourceEnvelopeExceeded: "ResourceEnvelopeExceeded",
  /** The derived Namespace is being deleted while the SubPool is active. */
  NamespaceTerminating: "NamespaceTerminating",
  /** The StatefulSet has fewer ready replicas than wanted. */
  StatefulSetNotReady: "StatefulSetNotReady",
  /** The shared proxy gateway has no ready endpoint. */
  ProxyGatewayNotReady: "ProxyGatewayNotReady",
  /** The HTTPRoute is not (yet) accepted by its Gateway. */
  RouteNotReady: "RouteNotReady",
  /** The cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes. */
  GatewayAPIMissing: "GatewayAPIMissing",
  /** Everything is in place and ready. */
  Ready: "Ready",
  /** RouteReady: the HTTPRoute is accepted by its Gateway. */
  Accepted: "Accepted",
  /** ProxyGatewayReady: the shared proxy gateway has a ready endpoint. */
  EndpointReady: "EndpointReady",
  /** Suspended=False: the pool runs. */
  Active: "Active",
  /** Ready=Unknown: no pass has judged the pool yet. */
  Pending: "Pending",
} as const;
export type SubPoolReason = (typeof SubPoolReason)[keyof typeof SubPoolReason];

export const exposureModeSchema = z.enum(["Internal", "Gateway"]);
export type ExposureMode = z.infer<typeof exposureModeSchema>;
export const ExposureMode = exposureModeSchema.def.entries;

const exposureSchema = z.object({
  mode: exposureModeSchema,
  hostname: z.optional(z.string().check(z.maxLength(253)).check(z.regex(dnsSubdomain))),
  gateway: z.optional(
    z.object({
      name: z.string().check(z.minLength(1)).check(z.maxLength(253)),
      namespace: z.string().check(z.minLength(1)).check(z.maxLength(63)).check(z.regex(dnsLabel)),
    }),
  ),
});

const containerResourcesSchema = z.object({
  requests: z.object({ cpu: quantitySchema(), memory: quantitySchema() }),
  limits: z.optional(z.object({ cpu: z.optional(quantitySchema()), memory: z.optional(quantitySchema()) })),
});
export type ContainerResources = z.infer<typeof containerResourcesSchema>;

const containerSchema = z.object({
  image: z.string().check(z.minLength(1)),
  resources: containerResourcesSchema,
});

export const subPoolSpecSchema = z.object({
  exposure: exposureSchema,
  storage: z.object({
    size: quantitySchema(),
    storageClassName: z.optional(z.string().check(z.minLength(1))),
  }),
  cpa: containerSchema,
  cpaManager: containerSchema,
  suspend: z._default(z.boolean(), false),
});
export type SubPoolSpec = z.infer<typeof subPoolSpecSchema>;

export const subPoolStatusSchema = z.object({
  observedGeneration: z.optional(z.int().check(z.gte(0))),
  namespace: z.optional(z.string()),
  cpaService: z.optional(z.string()),
  hostname: z.optional(z.string()),
  conditions: z.optional(conditionsSchema()),
  /** kubefn's seal over this status (runtime/core/status-seal.ts): a status without it is not kubefn's. */
  seal: z.optional(z.string().check(z.maxLength(64))),
});
export type SubPoolStatus = z.infer<typeof subPoolStatusSchema>;

/** The SubPool kind; its CRD (descriptions, CEL rules, printer columns) is in crd.ts. */
export const subPoolKind = {
  group: subPoolGroup,
  version: subPoolVersion,
  kind: "SubPool",
  plural: "subpools",
  scope: "Cluster",
  spec: subPoolSpecSchema,
  status: subPoolStatusSchema,
} satisfies KindSpec<typeof subPoolSpecSchema, typeof subPoolStatusSchema>;

export const subPoolResource: Resource = resourceFor(subPoolKind);

/** A whole SubPool object: apiVersion/kind checked, metadata as is, spec and status parsed. */
export const subPoolSchema = objectSchemaFor(subPoolKind);
export type SubPool = z.infer<typeof subPoolSchema>;

/**
 * Narrows an object read from the API server to a {@link SubPool}, applying schema defaults.
 *
 * Caveats: the name rules are CEL on the CRD root and are not re-checked here.
 */
export function parseSubPool(obj: unknown): z.core.util.SafeParseResult<SubPool> {
  return subPoolSchema.safeParse(obj);
}

/**
 * The SubPool's finalizer as the runtime keeps it (seed: 正常活动对象先加入 finalizer): a valid
 * SubPool holds it before anything is created; one that fails the schema creates nothing and keeps
 * it as it is. The controller adds the cleanup, which deletes the derived Namespace first
 * (deletion.ts).
 */
export const subPoolFinalizing: Pick<FinalizerDeclaration, "name" | "want"> = {
  name: subPoolFinalizer,
  want: (object: KubeObject) => (parseSubPool(object).success ? "hold" : "as-is"),
};
