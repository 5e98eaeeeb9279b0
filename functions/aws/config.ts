import {
  type KubefnSettings,
  parsePlatformEnv,
  platformSchema,
  SettingsError,
} from "../../shared/app/index.ts";
import * as z from "../../shared/zod/index.ts";

/** The Lambda's settings (infra/aws/template.yaml): where the cluster and the queue are, and the shared ones. */
export interface AwsConfig extends KubefnSettings {
  /**
   * Where the kubeconfig comes from: inline (base64: read from Secrets Manager at cold start when
   * `KUBECONFIG_SECRET_ARN` is set, the template's choice; or set directly for local runs) or a
   * bundled file.
   */
  kubeconfig: { yaml: string } | { file: string };
  region: string;
  /** The reconcile queue: follow-ups and fan-out are sent there, and the function consumes it. */
  queueUrl: string;
}

const kubeconfigRequired = {
  message:
    "set KUBECONFIG_SECRET_ARN (a Secrets Manager secret holding the base64 kubeconfig), KUBECONFIG_BASE64 (local runs) or KUBECONFIG (a file in the bundle)",
  path: ["KUBECONFIG_BASE64"],
};

const envSchema = platformSchema(
  {
    KUBECONFIG_BASE64: z.optional(z.base64("KUBECONFIG_BASE64 must be base64").check(z.minLength(1))),
    KUBECONFIG: z.optional(z.string().check(z.minLength(1))),
    AWS_REGION: z.string({ error: "AWS_REGION is required (Lambda sets it)" }).check(z.minLength(1)),
    QUEUE_URL: z
      .string({ error: "QUEUE_URL is required (the reconcile queue's URL)" })
      .check(z.regex(/^https?:\/\/[^/]+\/./, "QUEUE_URL must be an SQS queue URL")),
  },
  { minuteSchedule: true },
).check(z.refine((e) => e.KUBECONFIG_BASE64 || e.KUBECONFIG, kubeconfigRequired));

/** The environment is missing a variable or holds a bad one; the message lists every problem. */
export class AwsConfigError extends SettingsError {
  override readonly name = "AwsConfigError";
}

/**
 * Reads the Lambda's settings from an environment whose secrets are already resolved
 * (`resolveSecretEnv` in ./secrets.ts fills `KUBECONFIG_BASE64` and `GCE_CREDENTIALS` from their
 * `*_SECRET_ARN`). `KUBECONFIG_BASE64` wins over `KUBECONFIG`; set directly it is for local runs
 * and tests only (see docs/deploying/aws.md).
 * @throws AwsConfigError naming every bad variable.
 */
export function parseAwsEnv(env: Record<string, string | undefined>): AwsConfig {
  const { e, settings } = parsePlatformEnv(envSchema, env, "invalid Lambda environment", AwsConfigError);
  return {
    ...settings,
    kubeconfig: e.KUBECONFIG_BASE64
      ? { yaml: Buffer.from(e.KUBECONFIG_BASE64, "base64").toString("utf8") }
      : { file: e.KUBECONFIG as string },
    region: e.AWS_REGION,
    queueUrl: e.QUEUE_URL,
  };
}
