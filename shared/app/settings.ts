import { type RsaJwk, signingJwksFrom } from "../auth/index.ts";
import {
  type ClusterDeclaration,
  type CredentialKind,
  clustersVariable,
  parseServiceAccountKey,
  unusableCredentials,
} from "../credentials/index.ts";
import { DEFAULT_STATE_CHANGES_PER_INVOCATION, type LogLevel, logLevels } from "../runtime/index.ts";
import * as z from "../zod/index.ts";
import { DEFAULT_IDENTITY } from "./admission/index.ts";
import { commaList } from "./env-values.ts";
import { type OperatorSettings, operatorSettingsFrom, operatorVariables } from "./operator-settings.ts";

/** Pub/Sub push intake settings (see {@link HttpSettings.pubsub}). */
export interface PubSubSettings {
  audience: string;
  serviceAccountEmail: string;
  jwks?: { keys: RsaJwk[] };
  jwksUrl?: string;
}

/**
 * kubefn as its own OIDC issuer (see shared/auth/oidc-issuer.ts): on when `OIDC_ISSUER` and
 * `OIDC_SIGNING_KEY` are set; the API server's JWT authenticator trusts the issuer.
 */
export interface OidcIssuerSettings {
  /** The https URL kubefn is reached at; it serves discovery and the JWKS under it. */
  issuer: string;
  /** The private JWK, or JWK set whose first key signs (the rest are published only). */
  signingKey: string;
  audience: string;
  subject: string;
  tokenSeconds: number;
}

/** zod's email pattern; `z.email()` would add its own schema class to the Worker bundle. */
const emailAddress =
  /^(?:[A-Za-z0-9_'+-]+\.)*[A-Za-z0-9_'+-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9-]*\.)+[A-Za-z]{2,}$/;

/**
 * Who may see the fleet page: `token` — only with a credential of `API_TOKEN` for every namespace
 * (without `API_TOKEN` the page is not served); `open` — anyone, without condition messages, unless
 * `API_TOKEN` is set (then as `token`); `off` — never served.
 */
export const fleetPageAccesses = ["open", "token", "off"] as const;
export type FleetPageAccess = (typeof fleetPageAccesses)[number];

/** An optional shared secret or token: at least 16 characters when set. */
export const secretVariable = (name: string) =>
  z.optional(z.string().check(z.minLength(16, `${name} must be at least 16 characters`)));

/**
 * The one settings schema, read under the same names on every platform (Workers `[vars]` and
 * secrets, the Lambda environment, the Node host's environment). Spread into a platform's schema
 * beside its own variables (where the cluster and the queue are).
 */
export const settingsVariables = {
  /** The clusters one deployment reconciles (shared/credentials/clusters.ts); unset: one, `default`. */
  KUBEFN_CLUSTERS: clustersVariable,
  AUDIT_TOKEN: secretVariable("AUDIT_TOKEN"),
  RELAY_SECRET: secretVariable("RELAY_SECRET"),
  API_TOKEN: secretVariable("API_TOKEN"),
  STATUS_SEAL_KEY: secretVariable("STATUS_SEAL_KEY"),
  /** Who may see the fleet page (`GET /`); closed where the platform's URL is public. */
  FLEET_PAGE: z._default(z.enum(fleetPageAccesses), "token"),
  SELF_USERNAMES: z._default(commaList, [DEFAULT_IDENTITY]),
  MAX_BODY_BYTES: z._default(z.coerce.number().check(z.int()).check(z.gte(1024)), 4 * 1024 * 1024),
  REPLAY_WINDOW_SECONDS: z._default(z.coerce.number().check(z.int()).check(z.gte(10)), 300),
  PUBSUB_AUDIENCE: z.optional(z.string().check(z.minLength(1))),
  PUBSUB_SERVICE_ACCOUNT: z.optional(
    z.stringFormat("email", emailAddress, "PUBSUB_SERVICE_ACCOUNT must be a service account email"),
  ),
  /** Keys that verify who pushed: https, or http to this machine's loopback only (a local test server). */
  PUBSUB_JWKS_URL: z.optional(
    z.url({ protocol: /^https?$/, error: "PUBSUB_JWKS_URL must be an https URL" }).check(
      z.refine(
        (u) => u.startsWith("https://") || /^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:|\/|$)/.test(u),
        {
          error:
            "PUBSUB_JWKS_URL must be an https URL (http only to loopback): keys fetched in clear could be swapped",
        },
      ),
    ),
  ),
  PUBSUB_JWKS: z.optional(
    z.pipe(
      z.string(),
      z.transform((s, ctx) => {
        try {
          const v = JSON.parse(s) as { keys?: unknown };
          if (Array.isArray(v.keys)) return v as { keys: RsaJwk[] };
        } catch {}
        ctx.issues.push({ code: "custom", message: 'PUBSUB_JWKS must be a JWKS: {"keys":[…]}', input: s });
        return z.NEVER;
      }),
    ),
  ),
  /** kubefn's own OIDC issuer URL: https only, the API server fetches its keys from it. */
  OIDC_ISSUER: z.optional(
    z.url({
      protocol: /^https$/,
      error: "OIDC_ISSUER must be an https URL (the API server accepts no other issuer)",
    }),
  ),
  OIDC_SIGNING_KEY: z.optional(
    z.string().check(
      z.refine(
        (s) => {
          try {
            return signingJwksFrom(s).length > 0;
          } catch {
            return false;
          }
        },
        {
          error: 'OIDC_SIGNING_KEY must be a private JWK (EC P-256 or RSA, with a kid) or a set {"keys":[…]}',
        },
      ),
    ),
  ),
  OIDC_AUDIENCE: z._default(z.string().check(z.minLength(1)), "kubefn"),
  OIDC_SUBJECT: z._default(z.string().check(z.minLength(1)), "kubefn"),
  OIDC_TOKEN_SECONDS: z._default(z.coerce.number().check(z.int()).check(z.gte(60)).check(z.lte(86400)), 600),
  SWEEP_PERIOD_SECONDS: z._default(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(3600)), 60),
  ADMISSION_RECHECK_SECONDS: z._default(
    z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(3600)),
    60,
  ),
  STATE_CHANGES_PER_INVOCATION: z._default(
    z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(10000)),
    DEFAULT_STATE_CHANGES_PER_INVOCATION,
  ),
  MIN_REPORT_SECONDS: z.optional(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(3600))),
  ORPHAN_GRACE_SECONDS: z.optional(z.coerce.number().check(z.int()).check(z.gte(0))),
  PROBE_CONCURRENCY: z._default(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(256)), 32),
  // Probes in flight per namespace (per instance); unset: half of PROBE_CONCURRENCY.
  PROBE_NAMESPACE_CONCURRENCY: z.optional(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(256))),
  PASS_CONCURRENCY: z._default(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(256)), 8),
  // Probes fan out as delayed probe-shard messages of this many objects (0: probed in the sweep).
  // At most 1,000: a shard's probes and writes stay within one invocation's subrequests (10,000 on Workers).
  PROBE_SHARD_SIZE: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(1000)), 40),
  // Back-pressure (shared/kube guardedKube): API requests per platform invocation; a circuit per instance.
  REQUEST_BUDGET: z._default(z.coerce.number().check(z.int()).check(z.gte(1)), 1000),
  CIRCUIT_FAILURES: z._default(z.coerce.number().check(z.int()).check(z.gte(1)), 5),
  CIRCUIT_OPEN_SECONDS: z._default(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(600)), 5),
  KUBE_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.gte(0.1)).check(z.lte(300)), 30),
  LOG_LEVEL: z._default(z.enum(logLevels), "info"),
  // The operators' own settings, each operator's variables (see operator-settings.ts).
  ...operatorVariables,
};

type SettingsVariables = z.infer<z.ZodMiniObject<typeof settingsVariables>>;

/** What {@link createKubefn} is built from besides its ports; parsed once by an adapter. */
export interface KubefnSettings {
  /** Bearer token the API server's audit webhook sends; audit batches are refused without it. */
  auditToken?: string;
  /** HMAC secret shared with the relay; relay batches are refused without it. */
  relaySecret?: string;
  /** Bearer token of the operators' HTTP APIs (the crawler API); off when unset. */
  apiToken?: string;
  /** Who may see the fleet page (`FLEET_PAGE`: `token` by default, `open` on the Node host). */
  fleetPage: FleetPageAccess;
  /**
   * Key of the seal kubefn puts on every status it writes (runtime/core/status-seal.ts); derived from
   * the audit token or the relay secret when unset. A platform secret kubefn's token cannot read.
   */
  statusSealKey?: string;
  /**
   * Whether an unset `statusSealKey` is derived from the audit token or the relay secret (the
   * default). A platform whose passes run where those secrets are not read (Lambda's reconcile
   * function) turns it off, so that every instance seals alike: with a key, or not at all.
   */
  deriveStatusSealKey?: boolean;
  /** Writes by these identities are dropped at intake (a status kubefn did not seal excepted). */
  selfUsernames: string[];
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** GKE audit logs by Pub/Sub push; on when `PUBSUB_AUDIENCE` and `PUBSUB_SERVICE_ACCOUNT` are set. */
  pubsub?: PubSubSettings;
  /** kubefn as its own OIDC issuer, authenticating with the JWTs it signs. */
  oidcIssuer?: OidcIssuerSettings;
  /** How often the platform runs the sweep; must match its schedule. */
  sweepPeriodSeconds: number;
  /**
   * How long one check of kubefn's admission policies holds (per process or isolate): passes,
   * jobs and sweeps wait while the last check found them missing, and ask again after this long.
   */
  admissionRecheckSeconds: number;
  /**
   * State changes (a primary became Ready or Unhealthy, …) one invocation publishes at most; the rest are
   * dropped and counted. Only where the platform has a sink (STATE_CHANGES_BUS, the STATE_CHANGES
   * queue binding, STATE_CHANGES_URL).
   */
  stateChangesPerInvocation: number;
  /** Least time between two status-affecting health reports of one probed object. */
  minReportIntervalSeconds?: number;
  /** How old an untracked provider instance must be before the orphan collector deletes it. */
  orphanGraceSeconds?: number;
  /** Probes in flight at once during a sweep. */
  probeConcurrency: number;
  /**
   * Probes in flight per namespace, per platform instance: one tenant's hanging targets hold at
   * most this many of {@link probeConcurrency}. Half of it (rounded up) when unset.
   */
  probeNamespaceConcurrency?: number;
  /** Passes run at once for one delivery (a Lambda event, the Node host's queue). */
  passConcurrency: number;
  /**
   * Fan health probes out through the queue, this many objects per probe-shard message; unset or
   * 0, the sweep probes in process, once per sweep (an interval below the sweep period is then
   * rounded up to it). Default 40 on every platform. On Workers a queue batch of up to 10
   * messages (wrangler.toml) runs in one invocation, each probe costing a connection and at most
   * one status write: 40 keeps a batch's writes well under {@link requestBudget}; on the free plan
   * (50 subrequests) use 2.
   */
  probeShardSize?: number;
  /**
   * API requests one platform invocation may send (a Workers queue batch or cron run, a Lambda
   * event, a Node host pass or sweep), across its passes; past it each pass ends as a transient
   * error (RequestBudgetExhausted). Default 1,000: well inside the Workers paid plan's 10,000
   * subrequests per invocation (probes and queue sends spend the rest), so kubefn stops itself,
   * with follow-ups, before the platform stops it.
   */
  requestBudget: number;
  /** When to stop sending requests to a failing API server, and for how long. */
  circuit: { failureThreshold: number; openSeconds: number };
  /** Per-request deadline of API calls, ms. */
  kubeTimeoutMs: number;
  /** The least severe level logged (`debug`, `info`, `warn`, `error`); the adapters build their log with it. */
  logLevel: LogLevel;
  /** Each operator's own settings, by operator name. */
  operators: OperatorSettings;
  /**
   * The declared clusters (`KUBEFN_CLUSTERS`), each with its own intake credentials; unset: the one
   * cluster of the platform's own settings, named `default`.
   */
  clusters?: ClusterDeclaration[];
}

/** The typed settings of a parsed environment. */
export function settingsFrom(e: SettingsVariables): KubefnSettings {
  const operators = operatorSettingsFrom(e, e.SELF_USERNAMES);
  if (!operators.ok) throw new SettingsError(`invalid operator settings:\n${operators.issues.join("\n")}`);
  if (e.KUBEFN_CLUSTERS && (e.AUDIT_TOKEN || e.RELAY_SECRET)) {
    throw new SettingsError(
      "invalid environment:\n  KUBEFN_CLUSTERS: with declared clusters, each cluster's auditToken and relaySecret are its own; unset AUDIT_TOKEN and RELAY_SECRET",
    );
  }
  return {
    operators: operators.settings,
    ...(e.KUBEFN_CLUSTERS ? { clusters: e.KUBEFN_CLUSTERS } : {}),
    ...(e.AUDIT_TOKEN ? { auditToken: e.AUDIT_TOKEN } : {}),
    ...(e.RELAY_SECRET ? { relaySecret: e.RELAY_SECRET } : {}),
    ...(e.API_TOKEN ? { apiToken: e.API_TOKEN } : {}),
    ...(e.STATUS_SEAL_KEY ? { statusSealKey: e.STATUS_SEAL_KEY } : {}),
    fleetPage: e.FLEET_PAGE,
    selfUsernames: e.SELF_USERNAMES,
    maxBodyBytes: e.MAX_BODY_BYTES,
    replayWindowSeconds: e.REPLAY_WINDOW_SECONDS,
    ...(e.PUBSUB_AUDIENCE && e.PUBSUB_SERVICE_ACCOUNT
      ? {
          pubsub: {
            audience: e.PUBSUB_AUDIENCE,
            serviceAccountEmail: e.PUBSUB_SERVICE_ACCOUNT,
            ...(e.PUBSUB_JWKS ? { jwks: e.PUBSUB_JWKS } : {}),
            ...(e.PUBSUB_JWKS_URL ? { jwksUrl: e.PUBSUB_JWKS_URL } : {}),
          },
        }
      : {}),
    ...(e.OIDC_ISSUER && e.OIDC_SIGNING_KEY
      ? {
          oidcIssuer: {
            issuer: e.OIDC_ISSUER,
            signingKey: e.OIDC_SIGNING_KEY,
            audience: e.OIDC_AUDIENCE,
            subject: e.OIDC_SUBJECT,
            tokenSeconds: e.OIDC_TOKEN_SECONDS,
          },
        }
      : {}),
    sweepPeriodSeconds: e.SWEEP_PERIOD_SECONDS,
    admissionRecheckSeconds: e.ADMISSION_RECHECK_SECONDS,
    stateChangesPerInvocation: e.STATE_CHANGES_PER_INVOCATION,
    ...(e.MIN_REPORT_SECONDS ? { minReportIntervalSeconds: e.MIN_REPORT_SECONDS } : {}),
    ...(e.ORPHAN_GRACE_SECONDS === undefined ? {} : { orphanGraceSeconds: e.ORPHAN_GRACE_SECONDS }),
    probeConcurrency: e.PROBE_CONCURRENCY,
    ...(e.PROBE_NAMESPACE_CONCURRENCY ? { probeNamespaceConcurrency: e.PROBE_NAMESPACE_CONCURRENCY } : {}),
    passConcurrency: e.PASS_CONCURRENCY,
    ...(e.PROBE_SHARD_SIZE ? { probeShardSize: e.PROBE_SHARD_SIZE } : {}),
    requestBudget: e.REQUEST_BUDGET,
    circuit: { failureThreshold: e.CIRCUIT_FAILURES, openSeconds: e.CIRCUIT_OPEN_SECONDS },
    kubeTimeoutMs: Math.round(e.KUBE_TIMEOUT_SECONDS * 1000),
    logLevel: e.LOG_LEVEL,
  };
}

/** The environment is missing a variable or holds a bad one; the message lists every problem. */
export class SettingsError extends Error {
  override readonly name: string = "SettingsError";
}

/**
 * Parses `env` with a platform's schema (its own variables plus {@link settingsVariables}).
 * An empty string counts as unset, as shells, env files and CloudFormation use it; `defaults`
 * are the platform's own defaults, in the environment's string form.
 *
 * @throws SettingsError naming every bad variable, after `what` ("invalid Worker environment").
 */
export function parseEnvironment<T extends z.ZodMiniType>(
  schema: T,
  env: Record<string, unknown>,
  what: string,
  defaults: Record<string, string> = {},
): z.infer<T> {
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = schema.safeParse({ ...defaults, ...set });
  if (!parsed.success) throw new SettingsError(`${what}:\n${describeIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * {@link parseEnvironment} then {@link settingsFrom}: a platform's own variables and the shared
 * settings, each {@link SettingsError} rethrown as the platform's class (`AwsConfigError`, …).
 */
export function parsePlatformEnv<T extends z.ZodMiniType<SettingsVariables>>(
  schema: T,
  env: Record<string, unknown>,
  what: string,
  PlatformError: new (message: string) => SettingsError,
  defaults: Record<string, string> = {},
): { e: z.infer<T>; settings: KubefnSettings } {
  try {
    const e = parseEnvironment(schema, env, what, defaults);
    return { e, settings: settingsFrom(e) };
  } catch (err) {
    throw err instanceof SettingsError ? new PlatformError(err.message) : err;
  }
}

/** One line per bad variable, for a configuration error's message. */
export function describeIssues(error: z.core.$ZodError): string {
  return error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n");
}

/**
 * What a platform can and cannot do, declared beside its own variables: {@link platformSchema}
 * refuses the settings it could not honour, each with a message naming the variable.
 */
export interface PlatformCapabilities {
  /** Its schedule fires at most once a minute (Workers cron, EventBridge): the sweep period is at least 60 s. */
  minuteSchedule?: boolean;
  /**
   * The credential kinds its declared clusters (`KUBEFN_CLUSTERS`) may use; none when unset: it
   * reconciles only the cluster of its own settings, and refuses a declared list.
   */
  credentialKinds?: readonly CredentialKind[];
  /**
   * It cannot trust a declared cluster's own CA (`ca`): a Worker's `fetch` trusts public roots
   * only. A declared `ca` is refused rather than ignored.
   */
  publicRootsOnly?: boolean;
}

/**
 * A platform's environment schema: its own variables, the shared {@link settingsVariables}, and
 * the refusals its {@link PlatformCapabilities} call for. Add platform-only checks with `.check`.
 */
export function platformSchema<S extends z.core.$ZodLooseShape>(own: S, can: PlatformCapabilities) {
  // The generic output hides the shared fields from TypeScript; they are there by construction.
  const shared = (e: unknown) => e as SettingsVariables;
  return z.object({ ...own, ...settingsVariables }).check(
    z.refine((e) => !can.minuteSchedule || shared(e).SWEEP_PERIOD_SECONDS >= 60, {
      message: "SWEEP_PERIOD_SECONDS must be at least 60 (the schedule runs every minute)",
      path: ["SWEEP_PERIOD_SECONDS"],
    }),
    clustersUsableBy(can.credentialKinds ?? []),
    z.superRefine((e: unknown, ctx) => {
      const { KUBEFN_CLUSTERS: clusters = [], OIDC_ISSUER, OIDC_SIGNING_KEY } = shared(e);
      const issuing = clusters.filter((c) => c.credential.kind === "oidc-issuer");
      if (issuing.length > 0 && !(OIDC_ISSUER && OIDC_SIGNING_KEY)) {
        const message = `${issuing.map((c) => c.name).join(", ")}: credential kind oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY`;
        ctx.issues.push({ code: "custom", message, path: ["KUBEFN_CLUSTERS"], input: e });
      }
      for (const c of clusters) {
        if (c.credential.kind !== "google" || parseServiceAccountKey(c.credential.key)) continue;
        const message = `${c.name}: credential google: key must be a service-account key (JSON with client_email and private_key)`;
        ctx.issues.push({ code: "custom", message, path: ["KUBEFN_CLUSTERS"], input: e });
      }
      for (const c of can.publicRootsOnly ? clusters.filter((c) => c.ca !== undefined) : []) {
        const message = `${c.name}: ca cannot be used on this platform (it trusts public roots only: put a publicly trusted endpoint, e.g. a Cloudflare Tunnel, in front of the API server)`;
        ctx.issues.push({ code: "custom", message, path: ["KUBEFN_CLUSTERS"], input: e });
      }
    }),
  );
}

/**
 * Refuses, at start, a declared cluster whose credential kind the platform cannot use, naming it
 * under `KUBEFN_CLUSTERS`: a platform's schema adds it with `.check`.
 */
export function clustersUsableBy(kinds: readonly CredentialKind[]) {
  return z.superRefine((e: unknown, ctx) => {
    for (const message of unusableCredentials((e as SettingsVariables).KUBEFN_CLUSTERS ?? [], kinds)) {
      ctx.issues.push({ code: "custom", message, path: ["KUBEFN_CLUSTERS"], input: e });
    }
  });
}
