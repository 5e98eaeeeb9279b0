import {
  type CredentialKind,
  type KubefnSettings,
  kubeGoogleCredentialsSchema,
  parsePlatformEnv,
  parseServiceAccountKey,
  platformSchema,
  type ServiceAccountKey,
  SettingsError,
} from "../../shared/app/index.ts";
import * as z from "../../shared/zod/index.ts";

/** The Lambda's settings (infra/aws/template.yaml): where the cluster and the queue are, and the shared ones. */
export interface AwsConfig extends KubefnSettings {
  /**
   * How the cluster is reached. A kubeconfig: inline (base64: read from Secrets Manager at cold
   * start when `KUBECONFIG_SECRET_ARN` is set; or set directly for local runs) or a bundled file.
   * Or EKS with the function's own role (`EKS_CLUSTER_NAME`): tokens minted and renewed from the
   * role's credentials, no secret at all (./eks-token.ts).
   */
  kubeconfig: { yaml: string } | { file: string } | { eks: EksCluster } | { google: GoogleCluster };
  /** `EKS_TOKEN_RENEW_SECONDS` in ms: how long one EKS token is used (a declared `eks` cluster's too). */
  eksRenewAfterMs: number;
  region: string;
  /** The reconcile queue: follow-ups and fan-out are sent there, and the function consumes it. */
  queueUrl: string;
  /** `STATE_CHANGES_BUS`: the bus (name or ARN) kubefn's state changes go to; none are sent when unset. */
  stateChangesBus?: string;
}

/** An EKS cluster reached as the function's IAM role (an access entry maps the role to kubefn's username). */
export interface EksCluster {
  /** `EKS_CLUSTER_NAME`: signed into every token, so a token for one cluster fails at another. */
  clusterName: string;
  /** `KUBE_SERVER`: the cluster's API endpoint (`aws eks describe-cluster` → `endpoint`). */
  server: string;
  /** `KUBE_CA_DATA`: base64 PEM of the cluster CA (`certificateAuthority.data`). */
  caData: string;
  /** `EKS_TOKEN_RENEW_SECONDS`: how long one token is used (EKS accepts it for 15 minutes). */
  renewAfterMs: number;
}

/** A cluster (GKE) that accepts a Google service account's access tokens (`KUBE_GOOGLE_CREDENTIALS`). */
export interface GoogleCluster {
  /** `KUBE_SERVER`: the cluster's API endpoint. */
  server: string;
  /** `KUBE_CA_DATA`: base64 PEM of the cluster CA (`masterAuth.clusterCaCertificate`). */
  caData: string;
  /** The service account's key; its access tokens are exchanged and renewed as they near expiry. */
  key: ServiceAccountKey;
}

const kubeconfigRequired = {
  message:
    "set KUBECONFIG_SECRET_ARN (a Secrets Manager secret holding the base64 kubeconfig), KUBECONFIG_BASE64 (local runs), KUBECONFIG (a file in the bundle), EKS_CLUSTER_NAME or KUBE_GOOGLE_CREDENTIALS_SECRET_ARN (with KUBE_SERVER and KUBE_CA_DATA)",
  path: ["KUBECONFIG_BASE64"],
};

const endpointNeeds = (name: "KUBE_SERVER" | "KUBE_CA_DATA") => ({
  message: `${name} is required with EKS_CLUSTER_NAME or KUBE_GOOGLE_CREDENTIALS`,
  path: [name],
});

/**
 * The credential kinds a Lambda's declared clusters (`KUBEFN_CLUSTERS`) may use: a bearer, a
 * kubeconfig file in the bundle, EKS tokens minted from the function's role, a Google service
 * account's tokens, kubefn's own OIDC tokens. Not `in-cluster`: a function runs in no Pod.
 */
export const lambdaCredentialKinds: readonly CredentialKind[] = [
  "token",
  "kubeconfig",
  "eks",
  "google",
  "oidc-issuer",
];

export const lambdaEnvSchema = platformSchema(
  {
    KUBECONFIG_BASE64: z.optional(z.base64("KUBECONFIG_BASE64 must be base64").check(z.minLength(1))),
    KUBECONFIG: z.optional(z.string().check(z.minLength(1))),
    EKS_CLUSTER_NAME: z.optional(
      z
        .string()
        .check(z.regex(/^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/, "EKS_CLUSTER_NAME must be an EKS cluster name")),
    ),
    KUBE_GOOGLE_CREDENTIALS: z.optional(kubeGoogleCredentialsSchema),
    KUBE_SERVER: z.optional(z.url({ protocol: /^https$/, error: "KUBE_SERVER must be an https URL" })),
    KUBE_CA_DATA: z.optional(z.base64("KUBE_CA_DATA must be base64").check(z.minLength(1))),
    // EKS accepts a token for 15 minutes: renew with at least a minute to spare.
    EKS_TOKEN_RENEW_SECONDS: z._default(
      z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(840)),
      600,
    ),
    AWS_REGION: z.string({ error: "AWS_REGION is required (Lambda sets it)" }).check(z.minLength(1)),
    QUEUE_URL: z
      .string({ error: "QUEUE_URL is required (the reconcile queue's URL)" })
      .check(z.regex(/^https?:\/\/[^/]+\/./, "QUEUE_URL must be an SQS queue URL")),
    STATE_CHANGES_BUS: z.optional(
      z
        .string()
        .check(
          z.regex(
            /^(arn:aws[\w-]*:events:[\w-]+:\d{12}:event-bus\/)?[\w.\-/]{1,256}$/,
            "STATE_CHANGES_BUS must be an EventBridge bus name or ARN",
          ),
        ),
    ),
  },
  { minuteSchedule: true, credentialKinds: lambdaCredentialKinds },
)
  .check(
    z.refine(
      (e) =>
        e.KUBEFN_CLUSTERS ||
        e.KUBECONFIG_BASE64 ||
        e.KUBECONFIG ||
        e.EKS_CLUSTER_NAME ||
        e.KUBE_GOOGLE_CREDENTIALS,
      kubeconfigRequired,
    ),
  )
  .check(
    z.refine(
      (e) => !(e.EKS_CLUSTER_NAME || e.KUBE_GOOGLE_CREDENTIALS) || e.KUBE_SERVER,
      endpointNeeds("KUBE_SERVER"),
    ),
  )
  .check(
    z.refine(
      (e) => !(e.EKS_CLUSTER_NAME || e.KUBE_GOOGLE_CREDENTIALS) || e.KUBE_CA_DATA,
      endpointNeeds("KUBE_CA_DATA"),
    ),
  );

/** The environment is missing a variable or holds a bad one; the message lists every problem. */
export class AwsConfigError extends SettingsError {
  override readonly name = "AwsConfigError";
}

/**
 * Reads the Lambda's settings from an environment whose secrets are already resolved
 * (`resolveSecretEnv` in ./secrets.ts fills `KUBECONFIG_BASE64` and `GCE_CREDENTIALS` from their
 * `*_SECRET_ARN`). `KUBECONFIG_BASE64` wins over `KUBECONFIG`; set directly it is for local runs
 * and tests only (see docs/deploying/aws.md). `EKS_CLUSTER_NAME` wins over both, then
 * `KUBE_GOOGLE_CREDENTIALS` (filled from `KUBE_GOOGLE_CREDENTIALS_SECRET_ARN`).
 * @throws AwsConfigError naming every bad variable.
 */
export function parseAwsEnv(env: Record<string, string | undefined>): AwsConfig {
  const { e, settings } = parsePlatformEnv(
    lambdaEnvSchema,
    env,
    "invalid Lambda environment",
    AwsConfigError,
  );
  return {
    ...settings,
    // The reconcile function does not read the intake's secrets: a key derived from them would
    // differ between the two functions. The seal needs STATUS_SEAL_KEY here, read by both.
    deriveStatusSealKey: false,
    // With declared clusters (`settings.clusters`) each is reached as it declares (./cluster.ts):
    // this is then the (unused) kubeconfig of today's settings, or an empty one.
    kubeconfig: e.EKS_CLUSTER_NAME
      ? {
          eks: {
            clusterName: e.EKS_CLUSTER_NAME,
            server: e.KUBE_SERVER as string,
            caData: e.KUBE_CA_DATA as string,
            renewAfterMs: e.EKS_TOKEN_RENEW_SECONDS * 1000,
          },
        }
      : e.KUBE_GOOGLE_CREDENTIALS
        ? {
            google: {
              server: e.KUBE_SERVER as string,
              caData: e.KUBE_CA_DATA as string,
              key: parseServiceAccountKey(e.KUBE_GOOGLE_CREDENTIALS) as ServiceAccountKey,
            },
          }
        : e.KUBECONFIG_BASE64
          ? { yaml: Buffer.from(e.KUBECONFIG_BASE64, "base64").toString("utf8") }
          : e.KUBECONFIG
            ? { file: e.KUBECONFIG }
            : { yaml: "" },
    eksRenewAfterMs: e.EKS_TOKEN_RENEW_SECONDS * 1000,
    region: e.AWS_REGION,
    queueUrl: e.QUEUE_URL,
    ...(e.STATE_CHANGES_BUS ? { stateChangesBus: e.STATE_CHANGES_BUS } : {}),
  };
}
