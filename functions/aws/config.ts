import { z } from "zod";

/**
 * The Lambda's settings, parsed once per execution environment from `process.env` (set by
 * infra/aws/template.yaml).
 */
export interface AwsConfig {
  /** Where the kubeconfig comes from: inline (base64, the template's choice) or a bundled file. */
  kubeconfig: { yaml: string } | { file: string };
  region: string;
  eventBusName: string;
  scheduleGroup: string;
  /** Role EventBridge Scheduler assumes to invoke this function. */
  schedulerRoleArn: string;
  /** Target of delayed follow-ups; unset means the invoked function's own ARN. */
  functionArn?: string;
  auditToken?: string;
  relaySecret?: string;
  /** Bearer token of the crawler API (/v1/proxies, /v1/leases); off when unset. */
  apiToken?: string;
  selfUsernames: string[];
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Must match the sweep rule's rate. */
  sweepPeriodSeconds: number;
  probeConcurrency: number;
  /** Passes run at once for one reconcile event. */
  passConcurrency: number;
  proxyResyncSeconds?: number;
}

const list = z.string().transform((s) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);
const secret = (name: string) => z.string().min(16, `${name} must be at least 16 characters`).optional();
const arn = (name: string) => z.string().startsWith("arn:", `${name} must be an ARN`);

const envSchema = z
  .object({
    KUBECONFIG_BASE64: z.base64("KUBECONFIG_BASE64 must be base64").min(1).optional(),
    KUBECONFIG: z.string().min(1).optional(),
    AWS_REGION: z.string({ error: "AWS_REGION is required (Lambda sets it)" }).min(1),
    EVENT_BUS_NAME: z.string({ error: "EVENT_BUS_NAME is required" }).min(1),
    SCHEDULE_GROUP: z.string().min(1).default("default"),
    SCHEDULER_ROLE_ARN: arn("SCHEDULER_ROLE_ARN"),
    FUNCTION_ARN: arn("FUNCTION_ARN").optional(),
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
    PROBE_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(32),
    PASS_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(8),
    PROXY_RESYNC_SECONDS: z.coerce.number().int().min(60).optional(),
  })
  .refine((e) => e.KUBECONFIG_BASE64 || e.KUBECONFIG, {
    message: "set KUBECONFIG_BASE64 (base64 kubeconfig) or KUBECONFIG (a file in the bundle)",
    path: ["KUBECONFIG_BASE64"],
  });

/** The environment is missing a variable or holds a bad one; the message lists every problem. */
export class AwsConfigError extends Error {
  override readonly name = "AwsConfigError";
}

/**
 * Reads the Lambda's settings. `KUBECONFIG_BASE64` wins over `KUBECONFIG` when both are set; an
 * empty variable counts as unset (CloudFormation cannot omit one conditionally without noise).
 *
 * Caveats: Lambda caps all environment variables at 4 KB together, so an inline kubeconfig must
 * be small: a ServiceAccount token plus the cluster CA fits, client-certificate kubeconfigs often
 * do not (bundle those as a file and set `KUBECONFIG`).
 *
 * @throws AwsConfigError naming every bad variable.
 */
export function parseAwsEnv(env: Record<string, string | undefined>): AwsConfig {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new AwsConfigError(`invalid Lambda environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    kubeconfig: e.KUBECONFIG_BASE64
      ? { yaml: Buffer.from(e.KUBECONFIG_BASE64, "base64").toString("utf8") }
      : { file: e.KUBECONFIG as string },
    region: e.AWS_REGION,
    eventBusName: e.EVENT_BUS_NAME,
    scheduleGroup: e.SCHEDULE_GROUP,
    schedulerRoleArn: e.SCHEDULER_ROLE_ARN,
    ...(e.FUNCTION_ARN ? { functionArn: e.FUNCTION_ARN } : {}),
    ...(e.AUDIT_TOKEN ? { auditToken: e.AUDIT_TOKEN } : {}),
    ...(e.RELAY_SECRET ? { relaySecret: e.RELAY_SECRET } : {}),
    ...(e.API_TOKEN ? { apiToken: e.API_TOKEN } : {}),
    selfUsernames: e.SELF_USERNAMES,
    maxBodyBytes: e.MAX_BODY_BYTES,
    replayWindowSeconds: e.REPLAY_WINDOW_SECONDS,
    sweepPeriodSeconds: e.SWEEP_PERIOD_SECONDS,
    probeConcurrency: e.PROBE_CONCURRENCY,
    passConcurrency: e.PASS_CONCURRENCY,
    ...(e.PROXY_RESYNC_SECONDS ? { proxyResyncSeconds: e.PROXY_RESYNC_SECONDS } : {}),
  };
}
