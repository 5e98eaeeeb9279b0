import { z } from "zod";
import type { HttpSettings } from "./http.ts";

/** A comma-separated list, trimmed, empties dropped. */
export const commaList = z.string().transform((s) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);

/** An optional shared secret or token: at least 16 characters when set. */
export const secretVariable = (name: string) =>
  z.string().min(16, `${name} must be at least 16 characters`).optional();

/**
 * The variables every serverless platform reads the same way: intake credentials and limits,
 * the crawler API token, the sweep period and the proxy resync. Spread into a platform's schema.
 */
export const functionVariables = {
  AUDIT_TOKEN: secretVariable("AUDIT_TOKEN"),
  RELAY_SECRET: secretVariable("RELAY_SECRET"),
  API_TOKEN: secretVariable("API_TOKEN"),
  SELF_USERNAMES: commaList.default(["system:serviceaccount:kubefn-system:kubefn"]),
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024),
  REPLAY_WINDOW_SECONDS: z.coerce.number().int().min(10).default(300),
  SWEEP_PERIOD_SECONDS: z.coerce.number().int().min(60).max(3600).default(60),
  PROXY_RESYNC_SECONDS: z.coerce.number().int().min(60).optional(),
  // Back-pressure (shared/kube createApiGuard). 900 stays under Workers' 1,000 subrequests.
  REQUEST_BUDGET: z.coerce.number().int().min(1).default(900),
  CIRCUIT_FAILURES: z.coerce.number().int().min(1).default(5),
  CIRCUIT_OPEN_SECONDS: z.coerce.number().int().min(1).max(600).default(5),
};

type FunctionVariables = z.infer<z.ZodObject<typeof functionVariables>>;

/** The settings {@link functionVariables} give, in the shape the adapters pass on. */
export interface FunctionSettings extends HttpSettings {
  /** Bearer token of the crawler API (/v1/proxies, /v1/leases); off when unset. */
  apiToken?: string;
  selfUsernames: string[];
  /** Must match the platform's sweep schedule. */
  sweepPeriodSeconds: number;
  proxyResyncSeconds?: number;
  /** API requests one invocation (a queue batch, a cron run) may send. */
  requestBudget: number;
  /** When to stop sending requests to a failing API server, and for how long. */
  circuit: { failureThreshold: number; openSeconds: number };
}

export function functionSettingsFrom(e: FunctionVariables): FunctionSettings {
  return {
    ...(e.AUDIT_TOKEN ? { auditToken: e.AUDIT_TOKEN } : {}),
    ...(e.RELAY_SECRET ? { relaySecret: e.RELAY_SECRET } : {}),
    ...(e.API_TOKEN ? { apiToken: e.API_TOKEN } : {}),
    selfUsernames: e.SELF_USERNAMES,
    maxBodyBytes: e.MAX_BODY_BYTES,
    replayWindowSeconds: e.REPLAY_WINDOW_SECONDS,
    sweepPeriodSeconds: e.SWEEP_PERIOD_SECONDS,
    ...(e.PROXY_RESYNC_SECONDS ? { proxyResyncSeconds: e.PROXY_RESYNC_SECONDS } : {}),
    requestBudget: e.REQUEST_BUDGET,
    circuit: { failureThreshold: e.CIRCUIT_FAILURES, openSeconds: e.CIRCUIT_OPEN_SECONDS },
  };
}

/** One line per bad variable, for a configuration error's message. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n");
}
