import type { AnalyticsEngineDataset, Queue as QueueBinding } from "@cloudflare/workers-types/index.ts";
import { z } from "zod";
import type { Message } from "../../shared/runtime/types.ts";
import { type OperatorSettings, operatorSettingsFrom, operatorVariables } from "../operator-settings.ts";
import {
  describeIssues,
  type FunctionSettings,
  functionSettingsFrom,
  functionVariables,
} from "../settings.ts";

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
export interface WorkerConfig extends FunctionSettings {
  /** API server base URL; its certificate must be publicly trusted (e.g. a tunnel). */
  kubeServer: string;
  kubeToken: string;
  /** Workers keep at most 6 connections open per invocation; more only queue up. */
  probeConcurrency: number;
  /** SubPool, Site and GCE settings (`GCE_CREDENTIALS` is a secret: `wrangler secret put`). */
  operators: OperatorSettings;
}

const envSchema = z.object({
  KUBE_SERVER: z.url({ protocol: /^https?$/, error: "KUBE_SERVER must be an http(s) URL" }),
  KUBE_TOKEN: z.string({ error: "KUBE_TOKEN is required (wrangler secret put KUBE_TOKEN)" }).min(1),
  ...functionVariables,
  ...operatorVariables,
  PROBE_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(6),
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
    throw new WorkerConfigError(`invalid Worker environment:\n${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  const operators = operatorSettingsFrom(e, e.SELF_USERNAMES);
  if (!operators.ok) {
    throw new WorkerConfigError(`invalid Worker environment:\n${operators.issues.join("\n")}`);
  }
  return {
    ...functionSettingsFrom(e),
    operators: operators.settings,
    kubeServer: e.KUBE_SERVER,
    kubeToken: e.KUBE_TOKEN,
    probeConcurrency: e.PROBE_CONCURRENCY,
  };
}
