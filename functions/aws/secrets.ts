import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";

/**
 * Variables filled from AWS Secrets Manager at cold start: `<ARN variable>` names a secret whose
 * SecretString becomes `<target>`. The template passes only the ARNs, so the kubeconfig and the
 * GCE key never sit in the function's configuration.
 */
export const SECRET_VARIABLES = {
  KUBECONFIG_SECRET_ARN: "KUBECONFIG_BASE64",
  GCE_CREDENTIALS_SECRET_ARN: "GCE_CREDENTIALS",
} as const;

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
