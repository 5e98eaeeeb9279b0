import * as z from "../../shared/zod/index.ts";
import {
  atLeastOneMinute,
  type KubefnSettings,
  parseEnvironment,
  SettingsError,
  settingsFrom,
  settingsVariables,
} from "../settings.ts";

/**
 * The Lambda's settings, parsed once per execution environment from `process.env` (set by
 * infra/aws/template.yaml): where the cluster and the bus are, and the settings every platform shares.
 */
export interface AwsConfig extends KubefnSettings {
  /** Where the kubeconfig comes from: inline (base64, the template's choice) or a bundled file. */
  kubeconfig: { yaml: string } | { file: string };
  region: string;
  eventBusName: string;
  scheduleGroup: string;
  /** Role EventBridge Scheduler assumes to invoke this function. */
  schedulerRoleArn: string;
  /** Target of delayed follow-ups; unset means the invoked function's own ARN. */
  functionArn?: string;
}

const arn = (name: string) => z.string().check(z.startsWith("arn:", `${name} must be an ARN`));

const envSchema = z
  .object({
    KUBECONFIG_BASE64: z.optional(z.base64("KUBECONFIG_BASE64 must be base64").check(z.minLength(1))),
    KUBECONFIG: z.optional(z.string().check(z.minLength(1))),
    AWS_REGION: z.string({ error: "AWS_REGION is required (Lambda sets it)" }).check(z.minLength(1)),
    EVENT_BUS_NAME: z.string({ error: "EVENT_BUS_NAME is required" }).check(z.minLength(1)),
    SCHEDULE_GROUP: z._default(z.string().check(z.minLength(1)), "default"),
    SCHEDULER_ROLE_ARN: arn("SCHEDULER_ROLE_ARN"),
    FUNCTION_ARN: z.optional(arn("FUNCTION_ARN")),
    ...settingsVariables,
  })
  .check(
    z.refine((e) => e.KUBECONFIG_BASE64 || e.KUBECONFIG, {
      message: "set KUBECONFIG_BASE64 (base64 kubeconfig) or KUBECONFIG (a file in the bundle)",
      path: ["KUBECONFIG_BASE64"],
    }),
  )
  .check(z.refine(atLeastOneMinute.check, atLeastOneMinute.message))
  // Delayed messages here are Scheduler schedules that carry no shard payload: a probe shard
  // would arrive as a pass on no object, and no Proxy would ever be probed.
  .check(
    z.refine((e) => !e.PROBE_SHARD_SIZE, {
      message: "probe shards need a queue that delays whole messages; unset PROBE_SHARD_SIZE on Lambda",
      path: ["PROBE_SHARD_SIZE"],
    }),
  );

/** The environment is missing a variable or holds a bad one; the message lists every problem. */
export class AwsConfigError extends SettingsError {
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
  let e: z.infer<typeof envSchema>;
  let settings: ReturnType<typeof settingsFrom>;
  try {
    e = parseEnvironment(envSchema, env, "invalid Lambda environment");
    settings = settingsFrom(e);
  } catch (err) {
    throw err instanceof SettingsError ? new AwsConfigError(err.message) : err;
  }
  return {
    ...settings,
    kubeconfig: e.KUBECONFIG_BASE64
      ? { yaml: Buffer.from(e.KUBECONFIG_BASE64, "base64").toString("utf8") }
      : { file: e.KUBECONFIG as string },
    region: e.AWS_REGION,
    eventBusName: e.EVENT_BUS_NAME,
    scheduleGroup: e.SCHEDULE_GROUP,
    schedulerRoleArn: e.SCHEDULER_ROLE_ARN,
    ...(e.FUNCTION_ARN ? { functionArn: e.FUNCTION_ARN } : {}),
  };
}
