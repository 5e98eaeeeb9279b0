/**
 * The Proxy API (crawl.kubefn.dev/v1alpha1): a forward proxy that is either an instance kubefn
 * provisions through a provider (Managed) or an endpoint someone else runs (External), probed for
 * health either way. The zod schemas here are the single source of the TypeScript types, the
 * reconciler's parser and, with the notes in crd.ts, the CRD in infra/crds (`npm run gen:crds`).
 */

import { conditionsSchema, type KindSpec, objectSchemaFor, resourceFor } from "../../crd/index.ts";
import type { KubeObject, Resource } from "../../kube/index.ts";
import type { FinalizerDeclaration } from "../../runtime/index.ts";
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
  /** True while the stored probe timeout is out of range and probes use the cap instead. */
  ProbeTimeoutCapped: "ProbeTimeoutCapped",
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
  /**
   * kubefn may not read the Proxy's namespace (its Secrets, its Pods): the namespace did not opt
   * in with a RoleBinding of kubefn-tenant. Ready=False; converges once it does.
   */
  NamespaceNotOptedIn: "NamespaceNotOptedIn",
  UnknownProvider: "UnknownProvider",
  QuotaExceeded: "QuotaExceeded",
  PermanentError: "PermanentError",
  ProbeSucceeded: "ProbeSucceeded",
  ProbeFailed: "ProbeFailed",
  /**
   * An External endpoint on loopback, a private range or a metadata/link-local address, not
   * admitted by `PROBE_ALLOWED_CIDRS`: latched as a PermanentError (phase Failed).
   */
  EndpointNotAllowed: "EndpointNotAllowed",
  /** The sweep would not probe the target (loopback, private, link-local, metadata address, invalid URL). */
  ProbeTargetRefused: "ProbeTargetRefused",
  /** A stored `healthCheck.timeoutSeconds` above 30 s or its interval: probed with the cap. */
  TimeoutOutOfRange: "TimeoutOutOfRange",
  /** Ready=Unknown: the instance runs and its health check has not given a verdict yet. */
  AwaitingHealthCheck: "AwaitingHealthCheck",
  /** Ready=Unknown: no pass has written Provisioned yet. */
  Pending: "Pending",
  /** Ready=True: provisioned and its probes pass. */
  Healthy: "Healthy",
  /** Ready=True: provisioned, no health check configured. */
  Provisioned: "Provisioned",
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

const instanceSchema = z.object({
  image: z.optional(z.string().check(z.minLength(1))),
  machineType: z.optional(z.string().check(z.minLength(1))),
  zone: z.optional(z.string().check(z.minLength(1))),
  labels: z.optional(z.record(z.string(), z.string())),
});

const secretKeyRefSchema = z.object({
  name: z.string().check(z.minLength(1)),
  key: z.optional(z.string().check(z.minLength(1))),
});

const cloudInitSchema = z
  .object({
    inline: z.optional(z.string()),
    secretRef: z.optional(secretKeyRefSchema),
  })
  .check(
    z.refine((c) => (c.inline === undefined) !== (c.secretRef === undefined), {
      message: "set exactly one of inline or secretRef",
    }),
  );

const endpointSchema = z.object({
  host: z.string().check(z.minLength(1)).check(z.maxLength(253)),
  port: z.int().check(z.gte(1)).check(z.lte(65535)),
  scheme: z._default(z.enum(["http", "https"]), "http"),
});

/**
 * The longest a probe may wait (seconds). Probe slots are shared by every tenant (6 per Worker
 * invocation), so one Proxy's hanging target must not hold one for minutes. The CRD refuses more
 * (and more than `intervalSeconds`); the parser still accepts the old bound of 300 so that a Proxy
 * stored before can be probed, reported (ProbeTimeoutCapped) and deleted: see {@link probeTimeoutSeconds}.
 */
export const maxProbeTimeoutSeconds = 30;

const healthCheckSchema = z.object({
  probeURL: z.url(),
  expectedStatus: z._default(z.int().check(z.gte(100)).check(z.lte(599)), 200),
  intervalSeconds: z._default(z.int().check(z.gte(5)).check(z.lte(86400)), 30),
  timeoutSeconds: z._default(z.int().check(z.gte(1)).check(z.lte(300)), 5),
  successThreshold: z._default(z.int().check(z.gte(1)).check(z.lte(100)), 2),
  failureThreshold: z._default(z.int().check(z.gte(1)).check(z.lte(100)), 3),
});

export const proxySpecSchema = z
  .object({
    mode: z._default(proxyModeSchema, "Managed"),
    provider: z.optional(z.string().check(z.minLength(1))),
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
  );
export type ProxySpec = z.infer<typeof proxySpecSchema>;

/** How long a probe of this health check may take: `timeoutSeconds`, at most 30 s and its interval. */
export const probeTimeoutSeconds = (hc: NonNullable<ProxySpec["healthCheck"]>): number =>
  Math.min(hc.timeoutSeconds, maxProbeTimeoutSeconds, hc.intervalSeconds);

export const proxyStatusSchema = z.object({
  observedGeneration: z.optional(z.int().check(z.gte(0))),
  phase: z.optional(proxyPhaseSchema),
  providerID: z.optional(z.string()),
  ip: z.optional(z.string()),
  latencyMillis: z.optional(z.int().check(z.gte(0))),
  latencySamples: z.optional(z.int().check(z.gte(1)).check(z.lte(100))),
  lastHealthCheckTime: z.optional(z.iso.datetime({ offset: true })),
  conditions: z.optional(conditionsSchema()),
  health: z.optional(z.string().check(z.maxLength(4096))),
  /** kubefn's seal over this status (runtime/core/status-seal.ts): a status without it is not kubefn's. */
  seal: z.optional(z.string().check(z.maxLength(64))),
});
export type ProxyStatus = z.infer<typeof proxyStatusSchema>;

/** The Proxy kind; its CRD (descriptions, CEL rules, printer columns) is in crd.ts. */
export const proxyKind = {
  group: proxyGroup,
  version: proxyVersion,
  kind: "Proxy",
  plural: "proxies",
  scope: "Namespaced",
  spec: proxySpecSchema,
  status: proxyStatusSchema,
} satisfies KindSpec<typeof proxySpecSchema, typeof proxyStatusSchema>;

export const proxyResource: Resource = resourceFor(proxyKind);

/** A whole Proxy object: apiVersion/kind checked, metadata as is, spec and status parsed. */
export const proxySchema = objectSchemaFor(proxyKind);
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

/**
 * The Proxy's finalizer as the runtime keeps it (seed §3, §4): a Managed Proxy holds it from its
 * first pass, before anything is created; an External one lets it go once what Managed mode made
 * is gone; an object that fails the schema creates nothing and keeps it as it is. The controller
 * adds the cleanup (controller.ts).
 */
export const proxyFinalizing: Pick<FinalizerDeclaration, "name" | "want"> = {
  name: proxyFinalizer,
  want(object: KubeObject) {
    const parsed = parseProxy(object);
    if (!parsed.success) return "as-is";
    return parsed.data.spec.mode === ProxyMode.External ? "release" : "hold";
  },
};
