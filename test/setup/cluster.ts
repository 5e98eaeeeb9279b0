/**
 * Typed access, for integration tests, to the devcluster started by test/setup/devcluster.ts.
 *
 * @example
 * import { clusterInfo, kubectl, kubeConfig, auditEventsSince } from "../setup/cluster.ts";
 * const { httpProxy, adminToken } = clusterInfo();
 * const r = await kubectl(["get", "ns", "-o", "name"]);
 */
import { spawn } from "node:child_process";
import { KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { type ChildOutput, outputOf } from "../support/child-output.ts";
import "./devcluster.ts"; // the ProvidedContext declaration

export interface ClusterInfo {
  kubeconfig: string;
  server: string;
  httpProxy: string;
  version: string;
  adminToken: string;
  dataDir: string;
  devclusterBin: string;
  auditCollector: string;
}

export function clusterInfo(): ClusterInfo {
  return {
    kubeconfig: inject("kubeconfig"),
    server: inject("server"),
    httpProxy: inject("httpProxy"),
    version: inject("version"),
    adminToken: inject("adminToken"),
    dataDir: inject("dataDir"),
    devclusterBin: inject("devclusterBin"),
    auditCollector: inject("auditCollector"),
  };
}

/** A @kubernetes/client-node KubeConfig for the admin user. */
export function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject("kubeconfig"));
  return kc;
}

/** What `kubectl` printed, and its exit code. */
export type KubectlResult = ChildOutput;

/** Runs `devcluster kubectl <args>` (kubectl of the cluster's version) as the admin. */
export function kubectl(args: string[], input?: string): Promise<KubectlResult> {
  return outputOf(
    spawn(inject("devclusterBin"), ["kubectl", "--kubeconfig", inject("kubeconfig"), ...args], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, KUBECONFIG: inject("kubeconfig") },
    }),
    input ?? "",
  );
}

/** An audit.k8s.io/v1 Event, as far as tests look at it. */
export interface AuditEvent {
  auditID: string;
  stage: string;
  level: string;
  verb: string;
  requestURI: string;
  user?: { username?: string; groups?: string[] };
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
    subresource?: string;
  };
  responseStatus?: { code?: number };
  requestObject?: unknown;
  responseObject?: unknown;
}

/** Audit events the collector received, from sequence number `since` on. */
export async function auditEventsSince(since = 0): Promise<{ events: AuditEvent[]; next: number }> {
  const res = await fetch(`${inject("auditCollector")}/events?since=${since}`);
  if (!res.ok) throw new Error(`audit collector: ${res.status}`);
  return (await res.json()) as { events: AuditEvent[]; next: number };
}

/** Polls the collector until an event matches (bounded), returning it. */
export async function waitForAuditEvent(
  match: (e: AuditEvent) => boolean,
  opts: { since?: number; timeoutMs?: number } = {},
): Promise<AuditEvent> {
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  for (;;) {
    const { events } = await auditEventsSince(opts.since ?? 0);
    const found = events.find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error("no matching audit event arrived in time");
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Polls `check` every `intervalMs` until it returns a value other than undefined (bounded). */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  { timeoutMs = 30_000, intervalMs = 100, what = "condition" } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
