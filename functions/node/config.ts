import { z } from "zod";
import { type OperatorSettings, operatorSettingsFrom, operatorVariables } from "../operator-settings.ts";
import { commaList, describeIssues, secretVariable } from "../settings.ts";
import type { NodeHostConfig } from "./host.ts";

const envSchema = z.object({
  KUBECONFIG: z.string().min(1).optional(),
  KUBEFN_HOST: z.string().default("127.0.0.1"),
  KUBEFN_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  KUBEFN_AUDIT_TOKEN: secretVariable("KUBEFN_AUDIT_TOKEN"),
  KUBEFN_RELAY_SECRET: secretVariable("KUBEFN_RELAY_SECRET"),
  // The seed's MaxConcurrentReconciles.
  KUBEFN_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(3),
  KUBEFN_SWEEP_SECONDS: z.coerce.number().int().min(1).max(3600).optional(),
  KUBEFN_SELF_USERNAMES: commaList.default(["system:serviceaccount:kubefn-system:kubefn"]),
  KUBEFN_MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024),
  KUBEFN_REPLAY_WINDOW_SECONDS: z.coerce.number().int().min(10).default(300),
  KUBEFN_INSTALL: z.enum(["true", "false"]).default("false"),
  KUBEFN_PROXY_RESYNC_SECONDS: z.coerce.number().int().min(60).max(86400).default(300),
  KUBEFN_MIN_REPORT_SECONDS: z.coerce.number().int().min(1).max(3600).default(60),
  KUBEFN_API_TOKEN: secretVariable("KUBEFN_API_TOKEN"),
  KUBEFN_ORPHAN_GRACE_SECONDS: z.coerce.number().int().min(0).default(600),
  KUBEFN_LOG_FORMAT: z.enum(["text", "json"]).default("text"),
  // SUBPOOL_*, SITE_*, GCE_*: the same names as on Workers and Lambda.
  ...operatorVariables,
  /** Node only (a Worker has no filesystem): Site component manifests from this directory. */
  SITE_MANIFESTS_DIR: z.string().min(1).optional(),
});

export type NodeHostEnv = z.infer<typeof envSchema>;

/**
 * Reads the Node host's settings from the environment, once, at start. Throws one error that
 * lists every bad variable.
 */
export function parseNodeHostEnv(env: Record<string, string | undefined>): {
  config: NodeHostConfig;
  logFormat: "text" | "json";
  proxyResyncSeconds: number;
  minReportIntervalSeconds: number;
  apiToken?: string;
  orphanGraceSeconds: number;
  operators: OperatorSettings;
  siteManifestsDir?: string;
} {
  // An empty variable means unset, as shells and env files use it.
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = envSchema.safeParse(set);
  if (!parsed.success) {
    throw new Error(`invalid environment:\n${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  const operators = operatorSettingsFrom(e, e.KUBEFN_SELF_USERNAMES);
  if (!operators.ok) throw new Error(`invalid environment:\n${operators.issues.join("\n")}`);
  return {
    operators: operators.settings,
    ...(e.SITE_MANIFESTS_DIR ? { siteManifestsDir: e.SITE_MANIFESTS_DIR } : {}),
    logFormat: e.KUBEFN_LOG_FORMAT,
    proxyResyncSeconds: e.KUBEFN_PROXY_RESYNC_SECONDS,
    minReportIntervalSeconds: e.KUBEFN_MIN_REPORT_SECONDS,
    ...(e.KUBEFN_API_TOKEN ? { apiToken: e.KUBEFN_API_TOKEN } : {}),
    orphanGraceSeconds: e.KUBEFN_ORPHAN_GRACE_SECONDS,
    config: {
      ...(e.KUBECONFIG ? { kubeconfig: e.KUBECONFIG } : {}),
      host: e.KUBEFN_HOST,
      port: e.KUBEFN_PORT,
      ...(e.KUBEFN_AUDIT_TOKEN ? { auditToken: e.KUBEFN_AUDIT_TOKEN } : {}),
      ...(e.KUBEFN_RELAY_SECRET ? { relaySecret: e.KUBEFN_RELAY_SECRET } : {}),
      concurrency: e.KUBEFN_CONCURRENCY,
      // The embedded devcluster is for trying things: sweep (and so probe) every 10 s there.
      sweepSeconds: e.KUBEFN_SWEEP_SECONDS ?? (e.KUBECONFIG ? 60 : 10),
      selfUsernames: e.KUBEFN_SELF_USERNAMES,
      maxBodyBytes: e.KUBEFN_MAX_BODY_BYTES,
      replayWindowSeconds: e.KUBEFN_REPLAY_WINDOW_SECONDS,
      install: e.KUBEFN_INSTALL === "true",
    },
  };
}
