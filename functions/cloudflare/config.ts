import type {
  AnalyticsEngineDataset,
  DurableObjectNamespace,
  Queue as QueueBinding,
} from "@cloudflare/workers-types/index.ts";
import {
  type ClusterDeclaration,
  type CredentialKind,
  type KubefnSettings,
  kubeGoogleCredentialsSchema,
  type Message,
  type OidcIssuerSettings,
  parsePlatformEnv,
  parseServiceAccountKey,
  platformSchema,
  type ServiceAccountKey,
  SettingsError,
} from "../../shared/app/index.ts";
import * as z from "../../shared/zod/index.ts";
import type { StateChangeMessage } from "./state-changes.ts";

/**
 * The Worker's `env`: the bindings from wrangler.toml, `[vars]` and the secrets
 * (`wrangler secret put KUBE_TOKEN` or `KUBE_GOOGLE_CREDENTIALS`, `AUDIT_TOKEN`, `RELAY_SECRET`).
 */
export interface WorkerEnv {
  /** Producer binding of the `kubefn` queue; the same Worker consumes it. */
  KUBEFN_QUEUE: QueueBinding<Message>;
  /** Analytics Engine dataset the metrics go to, aggregated per invocation; without it they are dropped. */
  KUBEFN_METRICS?: AnalyticsEngineDataset;
  /** The Durable Object that holds the relay's tunnel (`KUBE_VIA = "relay"`; functions/cloudflare/tunnel.ts). */
  KUBEFN_TUNNEL?: DurableObjectNamespace;
  /** Producer binding of the user's queue for kubefn's state changes (./state-changes.ts); none are sent without it. */
  STATE_CHANGES?: QueueBinding<StateChangeMessage>;
  [variable: string]: unknown;
}

/** The Worker's settings, parsed once per isolate from `env`: where the cluster is, and the rest. */
export interface WorkerConfig extends KubefnSettings {
  /**
   * API server base URL; its certificate must be publicly trusted (e.g. a Cloudflare Tunnel's),
   * unless the requests go through the relay (`kubeVia: "relay"`), which uses its own.
   */
  kubeServer: string;
  /**
   * How API requests leave the Worker: `direct` (fetch to `kubeServer`), or `relay`: down the
   * WebSocket the in-cluster relay opened to the Worker, signed with `RELAY_SECRET`, sent on by
   * the relay to its API server over the cluster's TLS (no inbound exposure of the API server).
   */
  kubeVia: "direct" | "relay";
  /**
   * How kubefn authenticates: a fixed bearer token (`KUBE_TOKEN`), or a Google service account's
   * access tokens (`KUBE_GOOGLE_CREDENTIALS`, a key JSON; for GKE), renewed as they near expiry,
   * or JWTs kubefn signs as its own OIDC issuer (`OIDC_ISSUER`, `OIDC_SIGNING_KEY`).
   */
  kubeAuth: WorkerKubeAuth;
  /**
   * The declared clusters (`KUBEFN_CLUSTERS`), each reached with its own server and credential;
   * unset: the one cluster of `kubeServer` and `kubeAuth` (which, with a fleet, are its first's).
   */
  fleet?: WorkerCluster[];
}

/** How the Worker authenticates to one cluster (see {@link WorkerConfig.kubeAuth}). */
export type WorkerKubeAuth = { token: string } | { google: ServiceAccountKey } | { oidc: OidcIssuerSettings };

/** One declared cluster as the Worker reaches it. */
export interface WorkerCluster {
  declared: ClusterDeclaration;
  kubeServer: string;
  kubeAuth: WorkerKubeAuth;
}

/**
 * The credential kinds a Worker's declared clusters may use: a bearer, a Google service account's
 * tokens, kubefn's own OIDC tokens. Not `kubeconfig` (a Worker has no files, nor exec plugins),
 * `in-cluster` (it runs in no Pod) nor `eks` (it holds no AWS role).
 */
export const workerCredentialKinds: readonly CredentialKind[] = ["token", "google", "oidc-issuer"];

export const workerEnvSchema = platformSchema(
  {
    KUBE_SERVER: z.url({ protocol: /^https?$/, error: "KUBE_SERVER must be an http(s) URL" }),
    KUBE_TOKEN: z.optional(z.string().check(z.minLength(1))),
    KUBE_GOOGLE_CREDENTIALS: z.optional(kubeGoogleCredentialsSchema),
    KUBE_VIA: z._default(z.enum(["direct", "relay"]), "direct"),
  },
  { minuteSchedule: true, credentialKinds: workerCredentialKinds, publicRootsOnly: true },
).check(
  z.refine(
    (e) =>
      e.KUBEFN_CLUSTERS || e.KUBE_TOKEN || e.KUBE_GOOGLE_CREDENTIALS || (e.OIDC_ISSUER && e.OIDC_SIGNING_KEY),
    {
      message:
        "KUBE_TOKEN is required (wrangler secret put KUBE_TOKEN), or KUBE_GOOGLE_CREDENTIALS for a service account's tokens, or OIDC_ISSUER and OIDC_SIGNING_KEY for kubefn's own",
      path: ["KUBE_TOKEN"],
      // Named beside the other bad variables, not only once they are fixed.
      when: () => true,
    },
  ),
  z.refine((e) => !(e.KUBEFN_CLUSTERS && e.KUBE_VIA === "relay"), {
    message:
      "KUBE_VIA = \"relay\" carries one cluster's API requests: with KUBEFN_CLUSTERS each cluster's server is reached directly (a publicly trusted endpoint)",
    path: ["KUBE_VIA"],
    when: () => true,
  }),
  z.refine((e) => e.KUBE_VIA !== "relay" || Boolean(e.RELAY_SECRET), {
    message:
      'KUBE_VIA = "relay" needs RELAY_SECRET (wrangler secret put RELAY_SECRET): it signs the tunnelled requests',
    path: ["KUBE_VIA"],
    when: () => true,
  }),
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
  const { e, settings } = parsePlatformEnv(workerEnvSchema, env, what, WorkerConfigError, workerDefaults);
  const fleet = settings.clusters?.map((declared) => workerCluster(declared, settings));
  const [first] = fleet ?? [];
  if (first)
    return {
      ...settings,
      kubeServer: first.kubeServer,
      kubeVia: e.KUBE_VIA,
      kubeAuth: first.kubeAuth,
      fleet,
    };
  const google = e.KUBE_GOOGLE_CREDENTIALS ? parseServiceAccountKey(e.KUBE_GOOGLE_CREDENTIALS) : undefined;
  return {
    ...settings,
    kubeServer: e.KUBE_SERVER,
    kubeVia: e.KUBE_VIA,
    kubeAuth: google
      ? { google }
      : settings.oidcIssuer
        ? { oidc: settings.oidcIssuer }
        : { token: e.KUBE_TOKEN as string },
  };
}

/** A declared cluster as the Worker reaches it; its kind, server and key were checked at parse. */
function workerCluster(declared: ClusterDeclaration, settings: KubefnSettings): WorkerCluster {
  const { credential } = declared;
  const kubeServer = declared.server as string;
  switch (credential.kind) {
    case "token":
      return { declared, kubeServer, kubeAuth: { token: credential.token } };
    case "google":
      return {
        declared,
        kubeServer,
        kubeAuth: { google: parseServiceAccountKey(credential.key) as ServiceAccountKey },
      };
    case "oidc-issuer":
      return {
        declared,
        kubeServer,
        kubeAuth: { oidc: { ...(settings.oidcIssuer as OidcIssuerSettings), audience: credential.audience } },
      };
    default:
      throw new WorkerConfigError(
        `invalid Worker environment:\n  KUBEFN_CLUSTERS: ${declared.name}: credential kind ${credential.kind} cannot be used on this platform`,
      );
  }
}
