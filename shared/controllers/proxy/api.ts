/**
 * The Proxy API (crawl.kubefn.dev/v1alpha1): a forward proxy that is either an instance kubefn
 * provisions through a provider (Managed) or an endpoint someone else runs (External), probed for
 * health either way. The zod schemas here are the single source of the TypeScript types, the
 * reconciler's parser and the CRD in infra/crds (`npm run gen:crds`).
 */

import {
  type CrdSpec,
  conditionsSchema,
  described,
  objectSchemaFor,
  resourceFor,
  withCel,
} from "../../crd/index.ts";
import type { Resource } from "../../kube/index.ts";
import * as z from "../../zod/index.ts";

export const proxyGroup = "crawl.kubefn.dev";
export const proxyVersion = "v1alpha1";

/** Held while a Managed proxy may still own a provider instance. External proxies never get it. */
export const proxyFinalizer = "crawl.kubefn.dev/finalizer";

/**
 * Annotation holding the hash of the spec (plus the resolved cloud-init) the current instance was
 * created from; a different hash means the instance is replaced.
 */
export const proxySpecHashAnnotation = "crawl.kubefn.dev/spec-hash";

/** Condition types on `status.conditions`. */
export const ProxyConditionType = {
  /** The instance exists and runs (Managed), or the endpoint is configured (External). */
  Provisioned: "Provisioned",
  /** The last health verdict, flipped only at the success/failure thresholds. */
  Healthy: "Healthy",
  /** The provider refused for quota; retried on a fixed interval. */
  QuotaExceeded: "QuotaExceeded",
  /** The provider refused for good; latched until the generation changes. */
  PermanentError: "PermanentError",
} as const;
export type ProxyConditionType = (typeof ProxyConditionType)[keyof typeof ProxyConditionType];

/** Condition reasons. CamelCase, as metav1.Condition requires. */
export const ProxyReason = {
  Provisioning: "Provisioning",
  Created: "Created",
  Replacing: "Replacing",
  Deleting: "Deleting",
  ExternalEndpoint: "ExternalEndpoint",
  CloudInitError: "CloudInitError",
  UnknownProvider: "UnknownProvider",
  QuotaExceeded: "QuotaExceeded",
  PermanentError: "PermanentError",
  ProbeSucceeded: "ProbeSucceeded",
  ProbeFailed: "ProbeFailed",
  /** The sweep would not probe the target (link-local, metadata address, invalid URL). */
  ProbeTargetRefused: "ProbeTargetRefused",
} as const;
export type ProxyReason = (typeof ProxyReason)[keyof typeof ProxyReason];

export const proxyModeSchema = z.enum(["Managed", "External"]);
export type ProxyMode = z.infer<typeof proxyModeSchema>;
export const ProxyMode = proxyModeSchema.def.entries;

export const proxyPhaseSchema = z.enum([
  "Pending",
  "Provisioning",
  "Ready",
  "Unhealthy",
  "Deleting",
  "Failed",
]);
export type ProxyPhase = z.infer<typeof proxyPhaseSchema>;
export const ProxyPhase = proxyPhaseSchema.def.entries;

const instanceSchema = described(
  z.object({
    image: described(
      z.optional(z.string().check(z.minLength(1))),
      "Provider-specific image, e.g. a container image or a GCE image.",
    ),
    machineType: described(
      z.optional(z.string().check(z.minLength(1))),
      "Provider-specific size, e.g. e2-small.",
    ),
    zone: z.optional(z.string().check(z.minLength(1))),
    labels: described(z.optional(z.record(z.string(), z.string())), "Labels put on the provider instance."),
  }),
  "How the provider shapes the instance (Managed mode).",
);

const secretKeyRefSchema = z.object({
  name: described(z.string().check(z.minLength(1)), "Name of a Secret in the Proxy's namespace."),
  key: described(z.optional(z.string().check(z.minLength(1))), 'Key in the Secret; defaults to "user-data".'),
});

const cloudInitSchema = withCel(
  z
    .object({
      inline: described(z.optional(z.string()), "cloud-init user data, inline."),
      secretRef: described(
        z.optional(secretKeyRefSchema),
        "cloud-init user data from a Secret; rotating it replaces the instance.",
      ),
    })
    .check(
      z.refine((c) => (c.inline === undefined) !== (c.secretRef === undefined), {
        message: "set exactly one of inline or secretRef",
      }),
    ),
  [
    {
      rule: "has(self.inline) != has(self.secretRef)",
      message: "set exactly one of cloudInit.inline or cloudInit.secretRef",
    },
  ],
);

const endpointSchema = described(
  z.object({
    host: z.string().check(z.minLength(1)).check(z.maxLength(253)),
    port: z.int().check(z.gte(1)).check(z.lte(65535)),
    scheme: z._default(z.enum(["http", "https"]), "http"),
  }),
  "Where an External proxy listens.",
);

const healthCheckSchema = described(
  z.object({
    probeURL: described(z.url(), "URL fetched through the proxy; https is tunnelled with CONNECT."),
    expectedStatus: z._default(z.int().check(z.gte(100)).check(z.lte(599)), 200),
    intervalSeconds: z._default(z.int().check(z.gte(5)).check(z.lte(86400)), 30),
    timeoutSeconds: z._default(z.int().check(z.gte(1)).check(z.lte(300)), 5),
    successThreshold: z._default(z.int().check(z.gte(1)).check(z.lte(100)), 2),
    failureThreshold: z._default(z.int().check(z.gte(1)).check(z.lte(100)), 3),
  }),
  "Periodic probe through the proxy; its verdict is the Healthy condition.",
);

export const proxySpecSchema = withCel(
  z
    .object({
      mode: z._default(proxyModeSchema, "Managed"),
      provider: described(
        z.optional(z.string().check(z.minLength(1))),
        'Provider name, e.g. "kubernetes" or "gce"; required when Managed.',
      ),
      instance: z.optional(instanceSchema),
      cloudInit: z.optional(cloudInitSchema),
      endpoint: z.optional(endpointSchema),
      healthCheck: z.optional(healthCheckSchema),
    })
    .check(
      z.superRefine((spec, ctx) => {
        if (spec.mode === "Managed" && spec.provider === undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["provider"],
            message: "provider is required when mode is Managed",
          });
        }
        if (spec.mode === "External" && spec.endpoint === undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["endpoint"],
            message: "endpoint is required when mode is External",
          });
        }
      }),
    ),
  [
    {
      rule: "self.mode != 'Managed' || has(self.provider)",
      message: "spec.provider is required when mode is Managed",
      fieldPath: ".provider",
      reason: "FieldValueRequired",
    },
    {
      rule: "self.mode != 'External' || has(self.endpoint)",
      message: "spec.endpoint is required when mode is External",
      fieldPath: ".endpoint",
      reason: "FieldValueRequired",
    },
  ],
);
export type ProxySpec = z.infer<typeof proxySpecSchema>;

export const proxyStatusSchema = z.object({
  observedGeneration: z.optional(z.int().check(z.gte(0))),
  phase: z.optional(proxyPhaseSchema),
  providerID: described(z.optional(z.string()), "The provider's identifier of the current instance."),
  ip: described(z.optional(z.string()), "The instance address (Managed) or spec.endpoint.host (External)."),
  latencyMillis: described(
    z.optional(z.int().check(z.gte(0))),
    "Latency of the last status-affecting probe.",
  ),
  lastHealthCheckTime: described(
    z.optional(z.iso.datetime({ offset: true })),
    "Time of the last status-affecting probe (suppressed probes do not write status).",
  ),
  conditions: z.optional(conditionsSchema(Object.values(ProxyConditionType))),
  health: described(
    z.optional(z.string().check(z.maxLength(4096))),
    "Probe bookkeeping of the health sweep (JSON). Kept in status, which tenants cannot write, not in an annotation, which they can.",
  ),
});
export type ProxyStatus = z.infer<typeof proxyStatusSchema>;

export const proxyCrd = {
  group: proxyGroup,
  version: proxyVersion,
  kind: "Proxy",
  plural: "proxies",
  singular: "proxy",
  shortNames: ["px"],
  scope: "Namespaced",
  description:
    "Proxy is a forward proxy: a provider-backed instance (Managed) or an existing endpoint (External).",
  spec: proxySpecSchema,
  status: proxyStatusSchema,
  printerColumns: [
    { name: "Mode", type: "string", jsonPath: ".spec.mode" },
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
    { name: "IP", type: "string", jsonPath: ".status.ip" },
    {
      name: "Latency",
      type: "integer",
      jsonPath: ".status.latencyMillis",
      description: "Probe latency in milliseconds",
    },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
} satisfies CrdSpec<typeof proxySpecSchema, typeof proxyStatusSchema>;

export const proxyResource: Resource = resourceFor(proxyCrd);

/** A whole Proxy object: apiVersion/kind checked, metadata as is, spec and status parsed. */
export const proxySchema = objectSchemaFor(proxyCrd);
export type Proxy = z.infer<typeof proxySchema>;

/**
 * Narrows an object read from the API server to a {@link Proxy}, applying schema defaults.
 *
 * Caveats: a failure means the stored object predates or escaped the CRD schema; report it
 * (`z.prettifyError(result.error)`) as a permanent error rather than retrying.
 */
export function parseProxy(obj: unknown): z.core.util.SafeParseResult<Proxy> {
  return proxySchema.safeParse(obj);
}
