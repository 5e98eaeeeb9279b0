/**
 * The Site API (unbounded-cloud.io/v1alpha3), as far as the component registry needs it: a
 * cluster-scoped Site whose status carries one condition per component. Cluster components (net,
 * machina) run for all Sites at once; Site components (metalman, storage) per Site and can be
 * switched off in the spec.
 */

import { conditionsSchema, type KindSpec, objectSchemaFor, resourceFor } from "../../crd/index.ts";
import type { Resource } from "../../kube/index.ts";
import * as z from "../../zod/index.ts";

export const siteGroup = "unbounded-cloud.io";
export const siteVersion = "v1alpha3";

/** Server-side apply field manager for every object the Site components apply. */
export const siteFieldOwner = "unbounded-operator";

/** Canonical node label for Site membership; per-Site workloads node-select on it. */
export const siteLabelKey = "unbounded-cloud.io/site";

/**
 * Site label used by released net controllers before unbounded-cloud.io/site. Per-Site workloads
 * match either key during the deprecation window.
 */
export const deprecatedSiteLabelKey = "net.unbounded-cloud.io/site";

/**
 * Name of the synthetic request that reconciles cluster components without a Site. It cannot
 * collide with a Site, since "_" is not allowed in object names.
 */
export const singletonRequestName = "__singletons";

/** Reasons published on Site.status.conditions. */
export const SiteReason = {
  Reconciled: "Reconciled",
  Disabled: "Disabled",
  NoSites: "NoSites",
  ReconcileError: "ReconcileError",
  /** The Site fails the schema (it escaped or predates the CRD); fixed only by editing it. */
  InvalidSpec: "InvalidSpec",
  /** Ready=Unknown: a component has not published its condition yet. */
  Pending: "Pending",
  /** A component's Deployment is applied and rolling out, not yet available. */
  DeploymentProgressing: "DeploymentProgressing",
  /** A component's Deployment is past its progress deadline (its Pods do not become available). */
  DeploymentStalled: "DeploymentStalled",
} as const;
export type SiteReason = (typeof SiteReason)[keyof typeof SiteReason];

/**
 * Condition types of the built-in components, one per component. The registry defines the order
 * (cluster components first) and rejects duplicates.
 */
export const SiteConditionType = {
  NetReady: "NetReady",
  MachinaReady: "MachinaReady",
  MetalmanReady: "MetalmanReady",
  StorageReady: "StorageReady",
} as const;
export type SiteConditionType = (typeof SiteConditionType)[keyof typeof SiteConditionType];

const componentToggleSchema = z.object({
  enabled: z._default(z.boolean(), true),
});

export const siteSpecSchema = z._default(
  z.object({
    displayName: z.optional(z.string().check(z.maxLength(253))),
    components: z.optional(
      z.object({
        metalman: z.optional(componentToggleSchema),
        storage: z.optional(componentToggleSchema),
      }),
    ),
  }),
  {},
);
export type SiteSpec = z.infer<typeof siteSpecSchema>;

export const siteStatusSchema = z.object({
  observedGeneration: z.optional(z.int().check(z.gte(0))),
  conditions: z.optional(conditionsSchema()),
  /** kubefn's seal over this status (runtime/core/status-seal.ts): a status without it is not kubefn's. */
  seal: z.optional(z.string().check(z.maxLength(64))),
});
export type SiteStatus = z.infer<typeof siteStatusSchema>;

/** The Site kind; its CRD (descriptions, CEL rules, printer columns) is in crd.ts. */
export const siteKind = {
  group: siteGroup,
  version: siteVersion,
  kind: "Site",
  plural: "sites",
  scope: "Cluster",
  spec: siteSpecSchema,
  status: siteStatusSchema,
} satisfies KindSpec<typeof siteSpecSchema, typeof siteStatusSchema>;

export const siteResource: Resource = resourceFor(siteKind);

/** A whole Site object: apiVersion/kind checked, metadata as is, spec (defaulted) and status parsed. */
export const siteSchema = objectSchemaFor(siteKind);
export type Site = z.infer<typeof siteSchema>;

/** Narrows an object read from the API server to a {@link Site}, applying schema defaults. */
export function parseSite(obj: unknown): z.core.util.SafeParseResult<Site> {
  return siteSchema.safeParse(obj);
}

/** Whether a per-Site component is enabled; absent toggles mean enabled. */
export function siteComponentEnabled(site: Site, component: "metalman" | "storage"): boolean {
  return site.spec.components?.[component]?.enabled ?? true;
}
