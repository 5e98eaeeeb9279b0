/**
 * What `kubefn install` puts in the cluster, by platform: the cluster side alone (CRDs, RBAC,
 * admission policies) for Workers and Lambda, plus the in-cluster host for `--platform node`, plus
 * the relay only when asked (`--relay`: no audit webhook or audit log export delivers the
 * cluster's changes), with its intake URL filled in and its Secret made here. And kubefn's
 * identities (`SELF_USERNAMES`), rendered into every admission policy and the status writers.
 */
import { randomBytes } from "node:crypto";
import {
  DEFAULT_IDENTITY,
  identitiesOf,
  identityCondition,
  withIdentities,
} from "../shared/app/admission/index.ts";
import type { Cluster, KubeObject } from "./cluster.ts";
import type { Change } from "./install.ts";

/** Where kubefn reconciles from. */
export const platforms = ["node", "cloudflare", "aws"] as const;
export type Platform = (typeof platforms)[number];

/** The Secret the relay signs with and the in-cluster host checks with (key {@link RELAY_SECRET_KEY}). */
export const INTAKE_SECRET = { namespace: "kubefn-system", name: "kubefn-intake" } as const;
export const RELAY_SECRET_KEY = "relay-secret";

/** The in-cluster host's intake (its Service, infra/host/deployment.yaml). */
export const IN_CLUSTER_INTAKE_URL = "http://kubefn.kubefn-system.svc:8080/v1/events";

/** One install's choices, parsed from the command line. */
export interface InstallChoice {
  platform?: Platform;
  /** The relay's intake URL; absent: no relay. */
  relayIntakeUrl?: string;
}

/**
 * The {@link InstallChoice} of `--platform`, `--relay` and `--intake-url` (pure), or what is wrong
 * with them: the relay needs an intake URL unless the in-cluster host is its intake.
 *
 * @example
 * installChoice({ platform: "cloudflare", relay: true, intakeUrl: "https://kubefn.example.workers.dev/v1/events" });
 */
export function installChoice(o: {
  platform?: string;
  relay?: boolean;
  intakeUrl?: string;
}): InstallChoice | { error: string } {
  if (o.platform !== undefined && !(platforms as readonly string[]).includes(o.platform)) {
    return { error: `--platform must be one of ${platforms.join(", ")}, not ${o.platform}` };
  }
  const platform = o.platform as Platform | undefined;
  if (!o.relay) {
    if (o.intakeUrl !== undefined) return { error: "--intake-url is the relay's: add --relay" };
    return platform ? { platform } : {};
  }
  const url = o.intakeUrl ?? (platform === "node" ? IN_CLUSTER_INTAKE_URL : undefined);
  if (url === undefined) {
    return {
      error: `--relay needs --intake-url <kubefn's https://…/v1/events>${platform === undefined ? " (or --platform node: the in-cluster host's)" : ""}`,
    };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { error: `--intake-url ${url} is not a URL` };
  }
  const inCluster = /\.svc(\.cluster\.local)?$/.test(parsed.hostname);
  if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && inCluster)) {
    return {
      error: `--intake-url ${url}: the relay posts over https (plain http only to a Service in the cluster)`,
    };
  }
  return { ...(platform ? { platform } : {}), relayIntakeUrl: parsed.href };
}

/** A comma-separated list of usernames, trimmed, empty entries dropped. */
export const usernameList = (s: string): string[] =>
  s
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);

/** kubefn's identities for an install, and where they came from (said in its report). */
export interface Identities {
  list: string[];
  from: string;
}

/**
 * The identities to render: `given` (`--self-usernames`, else the environment's `SELF_USERNAMES`);
 * without it the cluster's own (the `kubefn-identity` condition of its installed admission
 * policies), so installing again never undoes an EKS role, a Google account or an OIDC username
 * an earlier install or the chart added; on a cluster without kubefn, the ServiceAccount.
 */
export async function identitiesFor(cluster: Cluster, given: string | undefined): Promise<Identities> {
  if (given !== undefined) {
    const list = usernameList(given);
    identityCondition(list); // throws on an empty list or a username CEL cannot hold
    return { list, from: "SELF_USERNAMES as given" };
  }
  const policy = await cluster.get({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name: "kubefn-writes-only-its-own" },
  });
  const installed = policy ? identitiesOf(policy) : undefined;
  if (installed && installed.length > 0) return { list: installed, from: "the cluster's admission policies" };
  return { list: [DEFAULT_IDENTITY], from: "the default" };
}

/** `objects` for kubefn running as `identities` (policies and status writers; the rest as is). */
export const renderIdentities = <T extends KubeObject>(objects: T[], identities: Identities): T[] =>
  withIdentities(objects, identities.list);

type Secret = KubeObject & { data?: Record<string, string> };

/** The key of Secret kubefn-system/kubefn-intake the in-cluster host keys the status seal with. */
export const STATUS_SEAL_KEY_KEY = "status-seal-key";

/**
 * The keys of Secret kubefn-system/kubefn-intake an install makes (pure): the relay's HMAC secret
 * with the relay, and the status seal's key with the in-cluster host — without it the host would
 * derive the seal's key from the relay secret or the audit token, which channel writers hold.
 */
export function intakeSecretKeys(choice: InstallChoice): string[] {
  return [
    ...(choice.relayIntakeUrl ? [RELAY_SECRET_KEY] : []),
    ...(choice.platform === "node" ? [STATUS_SEAL_KEY_KEY] : []),
  ];
}

/**
 * Makes each of `keys` in Secret kubefn-system/kubefn-intake, 32 random bytes in hex, unless it is
 * there (a value someone set, or an earlier install's, is kept: the intake it matches and the
 * seals it made keep working). No value is ever printed.
 */
export async function ensureIntakeSecret(
  cluster: Cluster,
  keys: string[],
  opts: { dryRun: boolean },
): Promise<Change> {
  const object = `Secret ${INTAKE_SECRET.namespace}/${INTAKE_SECRET.name}`;
  const current = await cluster.get<Secret>({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { ...INTAKE_SECRET },
  });
  const missing = keys.filter((k) => !current?.data?.[k]);
  if (missing.length === 0) return { object, action: "unchanged", fields: [] };
  const data = Object.fromEntries(
    missing.map((k) => [k, Buffer.from(randomBytes(32).toString("hex")).toString("base64")]),
  );
  const query = opts.dryRun ? "?dryRun=All" : "";
  const base = `/api/v1/namespaces/${INTAKE_SECRET.namespace}/secrets`;
  if (current) {
    if (!opts.dryRun) {
      await cluster.call(
        "PATCH",
        `${base}/${INTAKE_SECRET.name}${query}`,
        { data },
        "application/merge-patch+json",
      );
    }
    return { object, action: "changed", fields: missing.map((k) => `.data.${k}`) };
  }
  if (!opts.dryRun) {
    await cluster.call("POST", base, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { ...INTAKE_SECRET, labels: { "app.kubernetes.io/part-of": "kubefn" } },
      type: "Opaque",
      data,
    });
  }
  return { object, action: "created", fields: [] };
}

const readSecret = `kubectl -n ${INTAKE_SECRET.namespace} get secret ${INTAKE_SECRET.name} -o jsonpath='{.data.${RELAY_SECRET_KEY}}' | base64 -d`;

/** What the user does next for `choice` (pure): the lines printed after the install's report. */
export function nextSteps(choice: InstallChoice, identities: Identities): string[] {
  const lines = [`kubefn's identities (SELF_USERNAMES, ${identities.from}): ${identities.list.join(", ")}`];
  if (choice.relayIntakeUrl) {
    lines.push(
      `the relay posts to ${choice.relayIntakeUrl}, signed with relay-secret of Secret ${INTAKE_SECRET.namespace}/${INTAKE_SECRET.name} (read it: ${readSecret})`,
    );
    if (choice.platform === "cloudflare")
      lines.push(`give the Worker the same value: ${readSecret} | npx wrangler secret put RELAY_SECRET`);
    if (choice.platform === "aws")
      lines.push(
        `give the Lambda stack the same value: aws secretsmanager create-secret --name kubefn/relay-secret --secret-string "$(${readSecret})", and its ARN as RelaySecretArn`,
      );
  } else {
    lines.push(
      "no relay: point the API server's audit webhook at kubefn's /v1/events, or use the provider's audit log export (docs/deploying/README.md); on a managed cluster without either, install with --relay",
    );
  }
  if (choice.platform === "node")
    lines.push(
      `the host seals statuses with ${STATUS_SEAL_KEY_KEY} of Secret ${INTAKE_SECRET.namespace}/${INTAKE_SECRET.name} (made if absent, never printed)`,
    );
  if (choice.platform === "cloudflare")
    lines.push(
      "give the Worker a status seal key of its own (a key no channel writer holds): openssl rand -hex 32 | npx wrangler secret put STATUS_SEAL_KEY",
    );
  if (choice.platform === "aws")
    lines.push(
      "the Lambda template makes the status seal key in Secrets Manager when StatusSealKeySecretArn is empty",
    );
  if (choice.platform === undefined)
    lines.push(
      "no in-cluster host: kubefn reconciles from a Worker, Lambda or a host outside (--platform node runs it here)",
    );
  return lines;
}
