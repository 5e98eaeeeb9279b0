import type { AnalyticsEngineDataset, Queue as QueueBinding } from "@cloudflare/workers-types/index.ts";
import {
  type KubefnSettings,
  parsePlatformEnv,
  platformSchema,
  SettingsError,
} from "../../shared/app/index.ts";
import type { Message } from "../../shared/runtime/index.ts";
import * as z from "../../shared/zod/index.ts";

/**
 * The Worker's `env`: the bindings from wrangler.toml, `[vars]` and the secrets
 * (`wrangler secret put KUBE_TOKEN`, `AUDIT_TOKEN`, `RELAY_SECRET`).
 */
export interface WorkerEnv {
  /** Producer binding of the `kubefn` queue; the same Worker consumes it. */
  KUBEFN_QUEUE: QueueBinding<Message>;
  /** Analytics Engine dataset the metrics go to, aggregated per invocation; without it they are dropped. */
  KUBEFN_METRICS?: AnalyticsEngineDataset;
  [variable: string]: unknown;
}

/** The Worker's settings, parsed once per isolate from `env`: where the cluster is, and the rest. */
export interface WorkerConfig extends KubefnSettings {
  /** API server base URL; its certificate must be publicly trusted (e.g. a tunnel). */
  kubeServer: string;
  kubeToken: string;
}

const envSchema = platformSchema(
  {
    KUBE_SERVER: z.url({ protocol: /^https?$/, error: "KUBE_SERVER must be an http(s) URL" }),
    KUBE_TOKEN: z
      .string({ error: "KUBE_TOKEN is required (wrangler secret put KUBE_TOKEN)" })
      .check(z.minLength(1)),
  },
  { minuteSchedule: true },
);

/** Workers keep at most 6 connections open per invocation; more only queue up. */
const workerDefaults = { PROBE_CONCURRENCY: "6" };

/** `env` is missing a variable or holds a bad one; the message lists every problem. */
export class WorkerConfigError extends SettingsError {
  override readonly name = "WorkerConfigError";
}

/**
 * Reads the Worker's settings from `env`. Variables come as strings (or JSON values) from
 * `[vars]`, secrets as strings.
 *
 * @throws WorkerConfigError naming every bad variable.
 */
export function parseWorkerEnv(env: Record<string, unknown>): WorkerConfig {
  const what = "invalid Worker environment";
  const { e, settings } = parsePlatformEnv(envSchema, env, what, WorkerConfigError, workerDefaults);
  return { ...settings, kubeServer: e.KUBE_SERVER, kubeToken: e.KUBE_TOKEN };
}
