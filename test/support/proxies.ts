/** Proxy objects as the API server returns them, for unit tests of the proxy's parts. */
import { type ProxyPhase, proxyResource } from "../../shared/controllers/proxy/api.ts";
import type { KubeObject } from "../../shared/kube/port.ts";

export { proxyResource };

export interface TestProxy {
  namespace?: string;
  name: string;
  uid?: string;
  phase?: ProxyPhase;
  ip?: string;
  latencyMillis?: number;
  labels?: Record<string, string>;
  mode?: "External" | "Managed";
  endpoint?: { host: string; port: number; scheme: "http" | "https" };
  deleting?: boolean;
  /** Leave out `spec.healthCheck` (such a proxy is never offered to crawlers). */
  noHealthCheck?: boolean;
}

/** A Proxy object as the API server would return it (External by default, status Ready). */
export function testProxy(p: TestProxy): KubeObject {
  const mode = p.mode ?? "External";
  const endpoint =
    p.endpoint ??
    (mode === "External" ? { host: p.ip ?? "10.0.0.1", port: 8080, scheme: "http" } : undefined);
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      namespace: p.namespace ?? "crawl",
      name: p.name,
      uid: p.uid ?? `uid-${p.name}`,
      labels: p.labels ?? {},
      ...(p.deleting ? { deletionTimestamp: "2026-11-30T11:00:00Z" } : {}),
    },
    spec: {
      mode,
      ...(mode === "Managed" ? { provider: "kubernetes" } : {}),
      ...(endpoint ? { endpoint } : {}),
      ...(p.noHealthCheck ? {} : { healthCheck: { probeURL: "http://probe.example/" } }),
    },
    status: {
      phase: p.phase ?? "Ready",
      ...(p.ip === undefined && mode === "External" ? { ip: endpoint?.host } : p.ip ? { ip: p.ip } : {}),
      ...(p.latencyMillis !== undefined ? { latencyMillis: p.latencyMillis } : {}),
    },
  };
}
