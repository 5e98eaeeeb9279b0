/**
 * The bridge to the health sweep: which Proxies are probed, where, and under which instance key
 * their counters are kept. The reconciler projects with the same key, so the two always agree.
 */

import type { HealthSubject } from "../../health/index.ts";
import { storedHealthOf } from "../../health/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import {
  ProxyConditionType,
  ProxyMode,
  type Proxy as ProxyObject,
  ProxyReason,
  parseProxy,
  probeTimeoutSeconds,
} from "./api.ts";
import { conditionOf, reportedLatencyFields } from "./status.ts";

/** Port a Managed proxy listens on (providers start the proxy there). */
export const managedProxyPort = 3128;
/** Minimum spacing of latency reports (the seed's MinReportInterval); verdict flips are never held back. */
export const minReportIntervalSeconds = 60;

/**
 * The instance a Proxy's health counters belong to: the providerID (Managed) or `host:port`
 * (External). A different value starts the counters afresh (a replaced instance is judged anew).
 */
export function healthInstanceOf(proxy: Pick<ProxyObject, "spec" | "status">): string | undefined {
  if (proxy.spec.mode === ProxyMode.External) {
    const e = proxy.spec.endpoint;
    return e ? `${e.host}:${e.port}` : undefined;
  }
  return proxy.status?.providerID || undefined;
}

export interface HealthSubjectOptions {
  /** Overrides {@link managedProxyPort}. */
  managedPort?: number;
  /** Overrides {@link minReportIntervalSeconds} (tests and small fleets use less). */
  minReportIntervalSeconds?: number;
}

/**
 * A Proxy as the health sweep sees it; pass it as `subjectFor` to `probeAll`.
 *
 * A proxy is probed only when it has a healthCheck, an instance key and an address, and is not
 * being deleted; otherwise the subject has no `instance`/`proxy` and the sweep skips it.
 *
 * @example
 * const result = await probeAll({ proxies, subjectFor: (p) => proxyHealthSubject(p), prober, now, concurrency: 32 });
 */
export function proxyHealthSubject(object: KubeObject, options: HealthSubjectOptions = {}): HealthSubject {
  const reportInterval = options.minReportIntervalSeconds ?? minReportIntervalSeconds;
  const stored = storedHealthOf(object);
  const key = { namespace: object.metadata.namespace ?? "", name: object.metadata.name ?? "" };
  const base = {
    key,
    ...(object.metadata.resourceVersion === undefined
      ? {}
      : { resourceVersion: object.metadata.resourceVersion }),
    deleting: object.metadata.deletionTimestamp !== undefined,
    ...(stored === undefined ? {} : { stored }),
  };
  const parsed = parseProxy(object);
  const hc = parsed.success ? parsed.data.spec.healthCheck : undefined;
  if (!parsed.success || !hc) {
    return {
      ...base,
      probe: { url: "", expectedStatus: 200, timeoutMs: 0 },
      thresholds: { successThreshold: 1, failureThreshold: 1, minReportIntervalSeconds: reportInterval },
    };
  }
  const proxy = parsed.data;
  const status = proxy.status ?? {};
  const instance = healthInstanceOf(proxy);
  const endpoint =
    proxy.spec.mode === ProxyMode.External
      ? proxy.spec.endpoint
      : status.ip
        ? { host: status.ip, port: options.managedPort ?? managedProxyPort, scheme: "http" as const }
        : undefined;
  const healthy = conditionOf(status, ProxyConditionType.Healthy);
  const seeded =
    healthy &&
    (healthy.reason === ProxyReason.ProbeSucceeded || healthy.reason === ProxyReason.ProbeFailed) &&
    healthy.status !== "Unknown";
  return {
    ...base,
    ...(instance && endpoint ? { instance, proxy: endpoint } : {}),
    // A Managed instance's address is the provider's (kubefn's); an External one is the tenant's.
    ...(proxy.spec.mode === ProxyMode.External ? {} : { proxyTrusted: true }),
    probe: {
      url: hc.probeURL,
      expectedStatus: hc.expectedStatus,
      timeoutMs: probeTimeoutSeconds(hc) * 1000,
      intervalSeconds: hc.intervalSeconds,
    },
    thresholds: {
      successThreshold: hc.successThreshold,
      failureThreshold: hc.failureThreshold,
      minReportIntervalSeconds: reportInterval,
    },
    // A latency report rides in the health patch only where status already shows this spec and a
    // healthy verdict; anything else is the pass's to write.
    ...(healthy?.status === "True" &&
    healthy.reason === ProxyReason.ProbeSucceeded &&
    status.observedGeneration === object.metadata.generation
      ? { latencyStatus: reportedLatencyFields }
      : {}),
    ...(seeded
      ? {
          seed: {
            healthy: healthy.status === "True",
            ...(status.latencyMillis === undefined ? {} : { latencyMs: status.latencyMillis }),
            ...(status.lastHealthCheckTime === undefined ? {} : { at: status.lastHealthCheckTime }),
          },
        }
      : {}),
  };
}

/**
 * The part of a listed Proxy that {@link proxyHealthSubject} reads, and its status write needs:
 * what a probe shard carries instead of the whole listed object. Dropped: labels, annotations (a
 * `last-applied-configuration` alone is kilobytes), managedFields, ownerReferences, the UID (the
 * status write is guarded by the resourceVersion), the instance and cloud-init of the spec, every
 * condition but Healthy, and Healthy's message. The subject of the view is the subject of the
 * object.
 *
 * @example
 * const shard = listed.map(proxyProbeView); // then proxyHealthSubject(shard[i]) equals proxyHealthSubject(listed[i])
 */
export function proxyProbeView(object: KubeObject): KubeObject {
  const { metadata } = object;
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  const status = object.status as (Record<string, unknown> & { conditions?: unknown }) | undefined;
  const pick = (from: Record<string, unknown>, keys: readonly string[]) => {
    const out: Record<string, unknown> = {};
    for (const k of keys) if (from[k] !== undefined) out[k] = from[k];
    return out;
  };
  const view: KubeObject = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: pick(metadata as Record<string, unknown>, [
      "namespace",
      "name",
      "resourceVersion",
      "generation",
      "deletionTimestamp",
    ]) as KubeObject["metadata"],
    spec: pick(spec, ["mode", "provider", "endpoint", "healthCheck"]),
  };
  if (status) {
    // Healthy's status and reason seed a fresh state; its message is read by no probe.
    const healthy = Array.isArray(status.conditions)
      ? status.conditions
          .filter((c: unknown) => (c as { type?: unknown } | null)?.type === ProxyConditionType.Healthy)
          .map((c: Record<string, unknown>) => ({ ...c, message: "" }))
      : undefined;
    view.status = {
      ...pick(status, [
        "observedGeneration",
        "providerID",
        "ip",
        "latencyMillis",
        "lastHealthCheckTime",
        "health",
      ]),
      ...(healthy && healthy.length > 0 ? { conditions: healthy } : {}),
    };
  }
  return view;
}
