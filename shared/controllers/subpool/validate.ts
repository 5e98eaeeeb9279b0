/**
 * Steps 2 and 3 of a pass, pure: Gateway completeness, then the SubPool ID, images, resources,
 * storage and the platform envelope. A failure is a stable reason and a message; the pass then
 * creates nothing.
 */

import { dnsLabel, imageReference, milliValue } from "../../kube/index.ts";
import {
  ExposureMode,
  SubPoolReason as Reason,
  type SubPool,
  type SubPoolReason,
  subPoolNameMaxLength,
} from "./api.ts";
import type { OperatorConfig } from "./config.ts";

/** Where the pool is reached from outside, once validated (Gateway mode only). */
export interface ResolvedRoute {
  hostname: string;
  gateway: { name: string; namespace: string };
}

/** Summed cpu and memory requests (milli-units) of the pool's own StatefulSet, as it runs. */
export interface RunningRequests {
  cpu: number;
  memory: number;
}

/**
 * The summed requests of a StatefulSet's containers (milli-units); unreadable values count 0.
 * Pure.
 */
export function runningRequests(statefulSet: { [field: string]: unknown }): RunningRequests {
  const containers =
    (
      statefulSet.spec as
        | { template?: { spec?: { containers?: { resources?: { requests?: Record<string, unknown> } }[] } } }
        | undefined
    )?.template?.spec?.containers ?? [];
  const sum = { cpu: 0, memory: 0 };
  for (const c of containers) {
    for (const resource of ["cpu", "memory"] as const) {
      const raw = c.resources?.requests?.[resource];
      sum[resource] += (typeof raw === "string" || typeof raw === "number" ? milliValue(raw) : 0) ?? 0;
    }
  }
  return sum;
}

export type Validation =
  | {
      ok: true;
      route: ResolvedRoute | undefined;
      /**
       * Set when the pool was admitted above the envelope (see `running`): the pool's own summed
       * requests, which its ResourceQuota must allow instead of the lower envelope.
       */
      aboveEnvelope?: { cpu: string; memory: string };
    }
  | { ok: false; reason: SubPoolReason; message: string };

/**
 * Validates a SubPool against the operator configuration, in the seed's order: Gateway
 * configuration first (step 2), then ID, images, resources, storage, envelope (step 3). Returns
 * the first failure.
 *
 * The envelope bounds what a pool may *start* asking for, never what it already runs with: a
 * suspended pool requests nothing and is not measured (scaling to zero is always possible), and
 * an active pool is measured against the larger of the envelope and `running` — the requests its
 * own StatefulSet already carries — so lowering the envelope never turns a running pool into a
 * permanent error; only growth beyond both is refused.
 *
 * Caveats: the CRD already enforces most of this; it is checked again because objects written
 * before the CRD rule (or with validation off) reach the controller too, and "nothing persistent
 * is created for an invalid pool" must not depend on admission.
 */
export function validateSubPool(
  pool: SubPool,
  config: OperatorConfig,
  running?: RunningRequests,
): Validation {
  const name = pool.metadata.name ?? "";
  const { exposure } = pool.spec;
  let route: ResolvedRoute | undefined;
  if (exposure.mode === ExposureMode.Gateway) {
    const gateway = exposure.gateway ?? config.gateway;
    const hostname =
      exposure.hostname ?? (config.hostnameSuffix ? `${name}.${config.hostnameSuffix}` : undefined);
    const missing = [gateway ? "" : "a Gateway", hostname ? "" : "a hostname"].filter(Boolean);
    if (!gateway || !hostname) {
      return invalid(
        Reason.GatewayConfigIncomplete,
        `Gateway mode needs ${missing.join(" and ")}: set spec.exposure or the operator configuration`,
      );
    }
    if (hostname.length > 253) {
      return invalid(Reason.GatewayConfigIncomplete, `hostname ${hostname} is longer than 253 characters`);
    }
    route = { hostname, gateway: { name: gateway.name, namespace: gateway.namespace } };
  }

  if (name.length > subPoolNameMaxLength || !dnsLabel.test(name)) {
    return invalid(
      Reason.InvalidSpec,
      `SubPool ID "${name}" must be a DNS label of at most ${subPoolNameMaxLength} characters`,
    );
  }

  const containers = [
    ["cpa", pool.spec.cpa],
    ["cpaManager", pool.spec.cpaManager],
  ] as const;
  const sums = { cpu: 0, memory: 0 };
  for (const [field, container] of containers) {
    if (!imageReference.test(container.image)) {
      return invalid(
        Reason.InvalidSpec,
        `spec.${field}.image "${container.image}" is not an image reference`,
      );
    }
    for (const resource of ["cpu", "memory"] as const) {
      const request = milliValue(container.resources.requests[resource]);
      if (request === undefined || request <= 0) {
        return invalid(Reason.InvalidSpec, `spec.${field}.resources.requests.${resource} must be positive`);
      }
      const rawLimit = container.resources.limits?.[resource];
      if (rawLimit !== undefined) {
        const limit = milliValue(rawLimit);
        if (limit === undefined || limit < request) {
          return invalid(
            Reason.InvalidSpec,
            `spec.${field}.resources.limits.${resource} (${rawLimit}) is below the request (${container.resources.requests[resource]})`,
          );
        }
      }
      sums[resource] += request;
    }
  }

  const storage = milliValue(pool.spec.storage.size);
  if (storage === undefined || storage <= 0) {
    return invalid(Reason.InvalidSpec, `spec.storage.size (${pool.spec.storage.size}) must be positive`);
  }

  if (pool.spec.suspend) return { ok: true, route };
  for (const resource of ["cpu", "memory"] as const) {
    const limit = Math.max(milliValue(config.envelope[resource]) ?? 0, running?.[resource] ?? 0);
    if (sums[resource] > limit) {
      const requested = containers.map(([, c]) => String(c.resources.requests[resource])).join(" + ");
      return invalid(
        Reason.ResourceEnvelopeExceeded,
        `cpa + cpaManager ${resource} requests (${requested}) exceed the platform envelope of ${config.envelope[resource]}`,
      );
    }
  }
  const envelope = {
    cpu: milliValue(config.envelope.cpu) ?? 0,
    memory: milliValue(config.envelope.memory) ?? 0,
  };
  if (sums.cpu > envelope.cpu || sums.memory > envelope.memory) {
    const quota = (resource: "cpu" | "memory") =>
      sums[resource] > envelope[resource] ? formatMilli(sums[resource]) : config.envelope[resource];
    return { ok: true, route, aboveEnvelope: { cpu: quota("cpu"), memory: quota("memory") } };
  }
  return { ok: true, route };
}

function invalid(reason: SubPoolReason, message: string): Validation {
  return { ok: false, reason, message };
}

/** A milli-value as a Kubernetes quantity: whole units when exact, else with the `m` suffix. */
function formatMilli(milli: number): string {
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}
