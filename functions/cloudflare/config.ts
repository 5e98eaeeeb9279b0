import type { AnalyticsEngineDataset, Queue as QueueBinding } from "@cloudflare/workers-types/index.ts";
import { z } from "zod";
import type { Message } from "../../shared/runtime/types.ts";

/**
 * The Worker's `env`: the bindings from wrangler.toml, `[vars]` and the secrets
 * (`wrangler secret put KUBE_TOKEN`, `AUDIT_TOKEN`, `RELAY_SECRET`).
 */
export interface WorkerEnv {
  /** Producer binding of the `kubefn` queue; the same Worker consumes it. */
  KUBEFN_QUEUE: QueueBinding<Message>;
  /** Optional Analytics Engine dataset for counters; without it metrics are dropped. */
  KUBEFN_METRICS?: AnalyticsEngineDataset;
  [variable: string]: unknown;
}

/** The Worker's settings, parsed once per isolate from `env`. */
export interface WorkerConfig {
  /** API server base URL; its certificate must be publicly trusted (e.g. a tunnel). */
  kubeServer: string;
  kubeToken: string;
  auditToken?: string;
  relaySecret?: string;
  /** Bearer token of the crawler API (/v1/proxies, /v1/leases); off when unset. */
  apiToken?: string;
  selfUsernames: string[];
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Must match the cron trigger's period. */
  sweepPeriodSeconds: number;
  /** Workers keep at most 6 connections open per invocation; more only queue up. */
  probeConcurrency: number;
  proxyResyncSeconds?: number;
}

const list = z.string().transform((s) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);
const secret = (name: string) => z.string().min(16, `${name} must be at least 16 characters`).optional();

const envSchema = z.object({
  KUBE_SERVER: z.url({ protocol: /^https?$/, error: "KUBE_SERVER must be an http(s) URL" }),
  KUBE_TOKEN: z.string({ error: "KUBE_TOKEN is required (wrangler secret put KUBE_TOKEN)" }).min(1),
  AUDIT_TOKEN: secret("AUDIT_TOKEN"),
  RELAY_SECRET: secret("RELAY_SECRET"),
  API_TOKEN: secret("API_TOKEN"),
  SELF_USERNAMES: list.default(["system:serviceaccount:kubefn-system:kubefn"]),
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024),
  REPLAY_WINDOW_SECONDS: z.coerce.number().int().min(10).default(300),
  SWEEP_PERIOD_SECONDS: z.coerce.number().int().min(60).max(3600).default(60),
  PROBE_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(6),
  PROXY_RESYNC_SECONDS: z.coerce.number().int().min(60).optional(),
});

/** `env` is missing a variable or holds a bad one; the message lists every problem. */
export class WorkerConfigError extends Error {
  override readonly name = "WorkerConfigError";
}

/**
 * Reads the Worker's settings from `env`. Variables come as strings (or JSON values) from
 * `[vars]`, secrets as strings.
 *
 * @throws WorkerConfigError naming every bad variable.
 */
export function parseWorkerEnv(env: Record<string, unknown>): WorkerConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new WorkerConfigError(`invalid Worker environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    kubeServer: e.KUBE_SERVER,
    kubeToken: e.KUBE_TOKEN,
    ...(e.AUDIT_TOKEN ? { auditToken: e.AUDIT_TOKEN } : {}),
    ...(e.RELAY_SECRET ? { relaySecret: e.RELAY_SECRET } : {}),
    ...(e.API_TOKEN ? { apiToken: e.API_TOKEN } : {}),
    selfUsernames: e.SELF_USERNAMES,
    maxBodyBytes: e.MAX_BODY_BYTES,
    replayWindowSeconds: e.REPLAY_WINDOW_SECONDS,
    sweepPeriodSeconds: e.SWEEP_PERIOD_SECONDS,
    probeConcurrency: e.PROBE_CONCURRENCY,
    ...(e.PROXY_RESYNC_SECONDS ? { proxyResyncSeconds: e.PROXY_RESYNC_SECONDS } : {}),
  };
}
