import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { Log } from "../../shared/app/index.ts";
import { type IntakeCredentials, settingsVariables } from "../../shared/app/index.ts";

/** The intake's credentials from Secrets Manager: re-read after a refusal (see {@link rotatingIntakeCredentials}). */
export const INTAKE_SECRET_VARIABLES = {
  AUDIT_TOKEN_SECRET_ARN: "AUDIT_TOKEN",
  RELAY_SECRET_ARN: "RELAY_SECRET",
} as const;

/**
 * Variables filled from AWS Secrets Manager at cold start: `<ARN variable>` names a secret whose
 * SecretString becomes `<target>`. The template passes only the ARNs, so the kubeconfig, the GCE
 * key, the audit token, the relay secret, the API token and the OIDC signing key never sit in the
 * function's configuration.
 */
export const SECRET_VARIABLES = {
  KUBECONFIG_SECRET_ARN: "KUBECONFIG_BASE64",
  GCE_CREDENTIALS_SECRET_ARN: "GCE_CREDENTIALS",
  KUBE_GOOGLE_CREDENTIALS_SECRET_ARN: "KUBE_GOOGLE_CREDENTIALS",
  STATUS_SEAL_KEY_SECRET_ARN: "STATUS_SEAL_KEY",
  API_TOKEN_SECRET_ARN: "API_TOKEN",
  OIDC_SIGNING_KEY_SECRET_ARN: "OIDC_SIGNING_KEY",
  // The declared clusters hold their credentials and intake secrets: a secret too.
  KUBEFN_CLUSTERS_SECRET_ARN: "KUBEFN_CLUSTERS",
  ...INTAKE_SECRET_VARIABLES,
} as const;

/** Least time between two re-reads of the intake's secrets, ms: a flood of refusals costs one read a minute. */
export const INTAKE_SECRETS_REREAD_MS = 60_000;

/** A secret named by ARN could not be read (missing, denied, empty, or not a string). */
export class AwsSecretError extends Error {
  override readonly name = "AwsSecretError";
}

/**
 * Returns `env` with every variable of {@link SECRET_VARIABLES} whose ARN variable is set replaced
 * by the secret's SecretString (one GetSecretValue per secret); the secret wins over an inline
 * value. Without any ARN variable, `env` is returned as it is and no AWS call is made (local runs
 * and tests set `KUBECONFIG_BASE64` directly).
 *
 * @throws AwsSecretError naming the variable, the ARN and what Secrets Manager answered.
 */
export async function resolveSecretEnv(
  env: Record<string, string | undefined>,
  options: { endpoint?: string } = {},
): Promise<Record<string, string | undefined>> {
  const wanted = Object.entries(SECRET_VARIABLES).filter(([arnVar]) => env[arnVar]);
  if (wanted.length === 0) return env;
  const client = new SecretsManagerClient({
    ...(env.AWS_REGION ? { region: env.AWS_REGION } : {}),
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
  });
  try {
    const resolved = { ...env };
    await Promise.all(
      wanted.map(async ([arnVar, target]) => {
        resolved[target] = await readSecret(client, arnVar, env[arnVar] as string);
      }),
    );
    return resolved;
  } finally {
    client.destroy();
  }
}

async function readSecret(client: SecretsManagerClient, arnVar: string, arn: string): Promise<string> {
  let value: string | undefined;
  try {
    value = (await client.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
  } catch (err) {
    const e = err as { name?: string; message?: string };
    throw new AwsSecretError(
      `${arnVar}: cannot read secret ${arn} from Secrets Manager: ${e.name ?? "Error"}: ${e.message ?? String(err)}` +
        " (does it exist, and may this function call secretsmanager:GetSecretValue on it?)",
      { cause: err },
    );
  }
  if (!value)
    throw new AwsSecretError(`${arnVar}: secret ${arn} has no SecretString (store the value as a string)`);
  return value;
}

/** The intake's credentials as last read, and a re-read for when a request was refused. */
export interface RotatingIntakeCredentials {
  current(): IntakeCredentials;
  /**
   * Reads the intake's secrets again, unless they were read less than
   * {@link INTAKE_SECRETS_REREAD_MS} ago (the cold start's read counts). True when a credential
   * changed, so the refused request is worth answering again.
   */
  refresh(): Promise<boolean>;
}

/**
 * The audit token and relay secret, read from Secrets Manager at cold start (`initial`, from
 * {@link resolveSecretEnv}) and again, at most once a minute, when a request is refused: a
 * rotated secret takes effect at the first refused request a minute after the last read, without
 * a redeploy or a cold start. A value that cannot be read or is too short keeps the old one (and
 * is logged).
 *
 * Caveats: between the rotation and the re-read, the relay's and the webhook's batches signed
 * with the new secret are refused (401); both retry.
 */
export function rotatingIntakeCredentials(
  env: Record<string, string | undefined>,
  initial: IntakeCredentials,
  options: { endpoint?: string; now: () => number; log: Log },
): RotatingIntakeCredentials {
  const arns = Object.entries(INTAKE_SECRET_VARIABLES).filter(([arnVar]) => env[arnVar]);
  let credentials: IntakeCredentials = {
    ...(initial.auditToken ? { auditToken: initial.auditToken } : {}),
    ...(initial.relaySecret ? { relaySecret: initial.relaySecret } : {}),
  };
  let readAt = options.now();
  let reading: Promise<boolean> | undefined;
  const reread = async (): Promise<boolean> => {
    const client = new SecretsManagerClient({
      ...(env.AWS_REGION ? { region: env.AWS_REGION } : {}),
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    });
    try {
      const next: Record<string, string | undefined> = {
        AUDIT_TOKEN: credentials.auditToken,
        RELAY_SECRET: credentials.relaySecret,
      };
      for (const [arnVar, target] of arns) {
        const value = await readSecret(client, arnVar, env[arnVar] as string);
        const valid = settingsVariables[target].safeParse(value);
        if (!valid.success) throw new AwsSecretError(`${arnVar}: ${valid.error.issues[0]?.message}`);
        next[target] = value;
      }
      const changed =
        next.AUDIT_TOKEN !== credentials.auditToken || next.RELAY_SECRET !== credentials.relaySecret;
      credentials = {
        ...(next.AUDIT_TOKEN ? { auditToken: next.AUDIT_TOKEN } : {}),
        ...(next.RELAY_SECRET ? { relaySecret: next.RELAY_SECRET } : {}),
      };
      if (changed) options.log.info("intake credentials re-read: a secret was rotated", {});
      return changed;
    } catch (err) {
      options.log.error("intake credentials could not be re-read; the last ones stay", {
        error: String(err),
      });
      return false;
    } finally {
      client.destroy();
    }
  };
  return {
    current: () => credentials,
    refresh() {
      // A request refused while a re-read is under way waits for it (and is answered again).
      if (reading) return reading;
      if (arns.length === 0 || options.now() - readAt < INTAKE_SECRETS_REREAD_MS)
        return Promise.resolve(false);
      readAt = options.now();
      reading = reread().finally(() => {
        reading = undefined;
      });
      return reading;
    },
  };
}
