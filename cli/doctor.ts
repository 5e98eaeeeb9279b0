/**
 * `kubefn doctor`: whether the current cluster is ready for this kubefn, asked as the user (their
 * kubeconfig), one line per check:
 *
 * - **access**: through SubjectAccessReviews, what kubefn's identity may do against what it needs —
 *   every rule of the roles infra/rbac binds to it, in the scope it is bound (cluster-wide, or the
 *   namespace of a RoleBinding) — and that it may not do more on those resources, nor read the
 *   Secrets of its own namespace;
 * - **policies**: the ValidatingAdmissionPolicies and bindings of infra/rbac are installed as this
 *   release has them, all contain the same list of kubefn's identities (`SELF_USERNAMES`), the
 *   identity is among them, the status writers list them all, and ConfigMap
 *   kubefn-system/kubefn-settings (the chart's), where there is one, has the same `SELF_USERNAMES`;
 * - **crds**: each CRD is installed, Established, and serves the versions and schemas this
 *   release's controllers read and write;
 * - **intake**: something delivers the cluster's changes to kubefn's intake (the relay, the audit
 *   webhook, an audit log export): doctor creates an intake canary (a ConfigMap in kubefn-system,
 *   see shared/runtime/intake/intake-canary.ts), waits a bounded time for intake's `IntakeReceived`
 *   Event about it, and deletes it.
 *
 * Caveats: the user needs create on authorization.k8s.io subjectaccessreviews (cluster admins have
 * it). The identity's groups are those the API server gives a ServiceAccount.
 */

import { readFileSync } from "node:fs";
import {
  admissionProblems,
  checkAdmissionPolicies,
  DEFAULT_IDENTITY,
  identitiesOf,
  STATUS_WRITERS,
  withIdentities,
} from "../shared/app/admission/index.ts";
import { clustersSchema } from "../shared/credentials/index.ts";
import {
  INTAKE_CANARY_CONTROLLER,
  INTAKE_CANARY_NAMESPACE,
  INTAKE_CANARY_PREFIX,
  INTAKE_RECEIVED_REASON,
} from "../shared/runtime/index.ts";
import * as z from "../shared/zod/index.ts";
import type { Cluster, KubeObject } from "./cluster.ts";
import { ApiError } from "./cluster.ts";

/** One result line. */
export interface Check {
  ok: boolean;
  what: string;
  /** What to do when it failed. */
  fix?: string;
}

/** A ServiceAccount kubefn runs as. */
export interface Identity {
  namespace: string;
  name: string;
}

/** One thing the identity needs: verbs on a resource, cluster-wide or in a namespace. */
export interface Access {
  verbs: string[];
  group: string;
  resource: string;
  namespace?: string;
  /** Only these objects (the rule's `resourceNames`): checked by name, never as the whole kind. */
  names?: string[];
  /** The role that grants it in infra/rbac. */
  role: string;
}

interface Rule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

const ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

/** `kubefn-system/kubefn` → the identity; throws on anything else. */
export function parseIdentity(s: string): Identity {
  const [namespace, name, ...rest] = s.split("/");
  if (!namespace || !name || rest.length > 0) throw new Error(`--as must be namespace/name, not ${s}`);
  return { namespace, name };
}

export const usernameOf = (id: Identity) => `system:serviceaccount:${id.namespace}:${id.name}`;

/**
 * What the identity needs, from infra/rbac's objects: the rules of every role bound to the
 * ServiceAccount `bound` (the one infra/rbac names, kubefn-system/kubefn), merged per resource and
 * scope, in file order.
 */
export function neededAccess(rbac: KubeObject[], bound: Identity): Access[] {
  const roles = new Map(
    rbac
      .filter((o) => o.kind === "ClusterRole" || o.kind === "Role")
      .map((o) => [roleKey(o.kind, o.metadata.name, o.metadata.namespace), o]),
  );
  const needs = new Map<string, Access>();
  for (const binding of rbac.filter((o) => o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding")) {
    const subjects = (binding.subjects ?? []) as Array<{ kind: string; name: string; namespace?: string }>;
    if (
      !subjects.some(
        (s) => s.kind === "ServiceAccount" && s.name === bound.name && s.namespace === bound.namespace,
      )
    )
      continue;
    const ref = binding.roleRef as { kind: string; name: string };
    const namespace = binding.kind === "RoleBinding" ? binding.metadata.namespace : undefined;
    const role = roles.get(roleKey(ref.kind, ref.name, ref.kind === "Role" ? namespace : undefined));
    if (!role)
      throw new Error(
        `${binding.kind} ${binding.metadata.name} refers to ${ref.kind} ${ref.name}, which infra/rbac does not declare`,
      );
    for (const rule of (role.rules ?? []) as Rule[]) {
      for (const group of rule.apiGroups) {
        for (const resource of rule.resources) {
          const names = rule.resourceNames?.length ? [...rule.resourceNames].sort() : undefined;
          const key = `${namespace ?? ""}|${group}|${resource}|${names?.join(",") ?? ""}`;
          const need = needs.get(key) ?? {
            verbs: [],
            group,
            resource,
            ...(namespace ? { namespace } : {}),
            ...(names ? { names } : {}),
            role: `${role.kind} ${role.metadata.name}`,
          };
          for (const verb of rule.verbs) if (!need.verbs.includes(verb)) need.verbs.push(verb);
          needs.set(key, need);
        }
      }
    }
  }
  return [...needs.values()];
}

const roleKey = (kind: string, name: string, namespace?: string) => `${kind}/${namespace ?? ""}/${name}`;

/** The verbs on a needed resource that the identity must not have (all it is not granted in that scope). */
export const excessVerbs = (need: Access, all: Access[]): string[] => {
  // A grant on named objects is checked by name; what the kind allows beyond it is the unnamed
  // grant's check (or, with none, nothing kubefn needs, which the policy review covers).
  if (need.names) return [];
  const granted = new Set(
    all
      .filter(
        (a) =>
          a.group === need.group &&
          a.resource === need.resource &&
          a.names === undefined &&
          (a.namespace === undefined || a.namespace === need.namespace),
      )
      .flatMap((a) => a.verbs),
  );
  // A subresource (proxies/status) has only the verbs its kind serves; check the ones granted.
  return need.resource.includes("/") ? [] : ALL_VERBS.filter((v) => !granted.has(v));
};

/** Whether every field of `expected` is in `actual` with the same value (the API server adds defaults). */
export function covers(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((e, i) => covers(actual[i], e))
    );
  }
  if (typeof expected === "object" && expected !== null) {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => covers((actual as Record<string, unknown>)[k], v));
  }
  return actual === expected;
}

const resourceName = (a: Pick<Access, "group" | "resource">) =>
  a.group ? `${a.resource}.${a.group}` : a.resource;
const scope = (a: Pick<Access, "namespace" | "names">) =>
  `${a.names ? `named ${a.names.join(",")} ` : ""}${a.namespace ? `in ${a.namespace}` : "cluster-wide"}`;

/** Asks the API server whether `id` may `verb` the resource in the scope of `access`. */
async function allowed(cluster: Cluster, id: Identity, verb: string, access: Access): Promise<boolean> {
  if (access.names) {
    for (const name of access.names) if (!(await allowedOne(cluster, id, verb, access, name))) return false;
    return true;
  }
  return allowedOne(cluster, id, verb, access, undefined);
}

async function allowedOne(
  cluster: Cluster,
  id: Identity,
  verb: string,
  access: Access,
  name: string | undefined,
): Promise<boolean> {
  const [resource, subresource] = access.resource.split("/");
  const review = await cluster.call<{ status: { allowed?: boolean } }>(
    "POST",
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: usernameOf(id),
        groups: ["system:serviceaccounts", `system:serviceaccounts:${id.namespace}`, "system:authenticated"],
        resourceAttributes: {
          verb,
          group: access.group,
          resource,
          ...(subresource ? { subresource } : {}),
          ...(access.namespace ? { namespace: access.namespace } : {}),
          ...(name ? { name } : {}),
        },
      },
    },
  );
  return review.status.allowed === true;
}

/**
 * What kubefn never needs, whatever the install chose: reading Secrets in bulk (list, watch),
 * patching them or deleting them by collection, cluster-wide. (Get, create and delete of a
 * tenant's Secret come with `kubefn-tenant`, bound per namespace or, by explicit choice,
 * cluster-wide.) A grant of any of these is the first thing a stolen token would use.
 */
export const neverNeeded: readonly (Access & { never: string[] })[] = [
  {
    verbs: [],
    never: ["list", "watch", "patch", "deletecollection"],
    group: "",
    resource: "secrets",
    role: "none",
  },
];

/**
 * Whether the identity may read the Secrets of its own namespace (kubefn-system): the host's
 * settings, the status seal key, the OIDC signing key, the intake's tokens — what the seal and
 * the intake assume its token cannot read. Nothing kubefn does needs it; a cluster-wide binding of
 * kubefn-tenant (the chart's `clusterWideTenantAccess`, `npm start`'s devcluster) or a RoleBinding
 * of it in that namespace grants it.
 */
export async function ownSecretsCheck(cluster: Cluster, id: Identity): Promise<Check> {
  const who = `${id.namespace}/${id.name}`;
  const own: Access = { verbs: [], group: "", resource: "secrets", namespace: id.namespace, role: "none" };
  return (await allowed(cluster, id, "get", own))
    ? {
        ok: false,
        what: `${who} may get secrets in ${id.namespace}, kubefn's own (its settings, the status seal key, the OIDC signing key, the intake's tokens)`,
        fix: `bind kubefn-tenant in each tenant namespace (kubectl create rolebinding kubefn-tenant -n <ns> ...), never cluster-wide (clusterWideTenantAccess) nor in ${id.namespace}`,
      }
    : { ok: true, what: `${who} may not get secrets in ${id.namespace}, kubefn's own` };
}

/** The access checks: one line per needed resource and scope, and one per thing never needed. */
export async function accessChecks(cluster: Cluster, id: Identity, needs: Access[]): Promise<Check[]> {
  const who = `${id.namespace}/${id.name}`;
  const never = await Promise.all(
    neverNeeded.map(async (n): Promise<Check> => {
      const granted: string[] = [];
      for (const verb of n.never) if (await allowed(cluster, id, verb, n)) granted.push(verb);
      return granted.length > 0
        ? {
            ok: false,
            what: `${who} may also ${granted.join(",")} ${resourceName(n)} ${scope(n)}, more than it needs`,
            fix: `find the binding that grants it (kubectl auth can-i --list --as=${usernameOf(id)}) and remove it`,
          }
        : { ok: true, what: `${who} may not ${n.never.join(",")} ${resourceName(n)} ${scope(n)}` };
    }),
  );
  const checks = await Promise.all(
    needs.map(async (need): Promise<Check> => {
      const denied: string[] = [];
      for (const verb of need.verbs) if (!(await allowed(cluster, id, verb, need))) denied.push(verb);
      const excess: string[] = [];
      for (const verb of excessVerbs(need, needs))
        if (await allowed(cluster, id, verb, need)) excess.push(verb);
      const what = `${who} may ${need.verbs.join(",")} ${resourceName(need)} ${scope(need)}`;
      if (denied.length > 0) {
        return {
          ok: false,
          what: `${who} may not ${denied.join(",")} ${resourceName(need)} ${scope(need)}`,
          fix: `apply ${need.role} and its binding to ${who} (kubefn install)`,
        };
      }
      if (excess.length > 0) {
        return {
          ok: false,
          what: `${who} may also ${excess.join(",")} ${resourceName(need)} ${scope(need)}, more than it needs`,
          fix: `find the binding that grants it (kubectl auth can-i --list --as=${usernameOf(id)}) and remove it`,
        };
      }
      return { ok: true, what };
    }),
  );
  return [...checks, ...never, await ownSecretsCheck(cluster, id)];
}

/**
 * The admission checks: each policy and binding kubefn requires installed and bound (the check
 * kubefn itself runs before it reconciles, shared/app/admission) and as the release has it, and
 * the status writers.
 */
export async function policyChecks(cluster: Cluster, id: Identity, policies: KubeObject[]): Promise<Check[]> {
  const checks: Check[] = [];
  const report = await checkAdmissionPolicies(cluster.kube);
  if (report.error !== undefined) {
    checks.push({
      ok: false,
      what: admissionProblems(report)[0] ?? "",
      fix: "kubectl get validatingadmissionpolicies",
    });
  }
  const installed = new Map<string, KubeObject | undefined>();
  for (const p of policies) installed.set(`${p.kind}/${p.metadata.name}`, await cluster.get(p));
  const identities = identityChecks(
    [...installed.values()].filter((p): p is KubeObject => p?.kind === "ValidatingAdmissionPolicy"),
    usernameOf(id),
  );
  // The release's policies as they are installed for the identities found.
  const expectedPolicies = withIdentities(policies, identities.list);
  for (const item of report.items) {
    const what = `${item.kind} ${item.name}`;
    const expected = expectedPolicies.find((p) => p.kind === item.kind && p.metadata.name === item.name);
    if (!item.ok) {
      checks.push({
        ok: false,
        what: `${what} ${item.problem}: kubefn does not reconcile without it`,
        fix: "kubefn install",
      });
      continue;
    }
    const got = expected && installed.get(`${expected.kind}/${expected.metadata.name}`);
    if (!expected || !got) checks.push({ ok: true, what: `${what} is installed` });
    else if (!covers(got.spec, expected.spec)) {
      checks.push({
        ok: false,
        what: `${what} differs from this release's`,
        fix: "kubefn install --dry-run, then kubefn install",
      });
    } else checks.push({ ok: true, what: `${what} is installed` });
  }
  checks.push(...identities.checks);
  const settings = await cluster.get<KubeObject & { data?: Record<string, string> }>({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "kubefn-settings", namespace: "kubefn-system" },
  });
  const configured = settings?.data?.SELF_USERNAMES;
  if (configured !== undefined) {
    const names = configured
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    checks.push(
      names.join(",") === identities.list.join(",")
        ? {
            ok: true,
            what: "SELF_USERNAMES in ConfigMap kubefn-system/kubefn-settings names the same identities",
          }
        : {
            ok: false,
            what: `SELF_USERNAMES in ConfigMap kubefn-system/kubefn-settings is ${configured}, the admission policies contain ${identities.list.join(",")}`,
            fix: "set settings.values.SELF_USERNAMES once and helm upgrade (it renders both)",
          },
    );
  }
  const writers = await cluster.get<KubeObject & { data?: Record<string, string> }>({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: STATUS_WRITERS.name, namespace: STATUS_WRITERS.namespace },
  });
  const listed = Object.values(writers?.data ?? {});
  for (const username of new Set([usernameOf(id), ...identities.list])) {
    checks.push(
      listed.includes(username)
        ? {
            ok: true,
            what: `${username} may write kubefn's status (ConfigMap kubefn-system/kubefn-status-writers)`,
          }
        : {
            ok: false,
            what: `${username} is not in ConfigMap kubefn-system/kubefn-status-writers: the admission policy refuses its status writes`,
            fix: `kubectl -n kubefn-system patch configmap kubefn-status-writers --type merge -p '{"data":{"${username === usernameOf(id) ? id.name : "kubefn-identity"}":"${username}"}}'`,
          },
    );
  }
  return checks;
}

/**
 * Which identities the installed policies contain (their `kubefn-identity` conditions): one list,
 * the same in every policy, with `username` (the identity doctor checks) among them.
 */
export function identityChecks(
  installed: KubeObject[],
  username: string,
): { list: string[]; checks: Check[] } {
  const lists = installed
    .map((p) => ({ name: p.metadata.name ?? "", ids: identitiesOf(p) }))
    .filter((p): p is { name: string; ids: string[] } => p.ids !== undefined);
  const list = lists[0]?.ids ?? [DEFAULT_IDENTITY];
  const differing = lists.filter((p) => p.ids.join(",") !== list.join(","));
  const checks: Check[] = [];
  checks.push(
    differing.length === 0
      ? { ok: true, what: `the admission policies contain kubefn's identities: ${list.join(", ")}` }
      : {
          ok: false,
          what: `the admission policies contain different identities: ${lists.map((p) => `${p.name} [${p.ids.join(", ")}]`).join("; ")}`,
          fix: "kubefn install (or helm upgrade) with one SELF_USERNAMES",
        },
  );
  checks.push(
    list.includes(username)
      ? { ok: true, what: `${username} is one of them: its writes are held to kubefn's shape` }
      : {
          ok: false,
          what: `${username} is not among the identities the admission policies contain: its writes are not held to kubefn's shape`,
          fix: "add it to SELF_USERNAMES and reinstall (kubefn install, or helm upgrade)",
        },
  );
  return { list, checks };
}

type CrdObject = KubeObject & {
  spec: { versions: Array<{ name: string; served: boolean; storage: boolean; schema?: unknown }> };
  status?: { conditions?: Array<{ type: string; status: string }> };
};

/** The CRD checks: installed, Established, serving this release's versions with its schemas. */
export async function crdChecks(cluster: Cluster, crds: KubeObject[], version: string): Promise<Check[]> {
  const fix = "kubectl apply --server-side --force-conflicts -f dist/crds.yaml (docs/upgrading.md)";
  const checks: Check[] = [];
  for (const expected of crds as CrdObject[]) {
    const name = expected.metadata.name;
    let installed: CrdObject | undefined;
    try {
      installed = await cluster.get<CrdObject>(expected);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      checks.push({ ok: false, what: `CRD ${name}: ${err.message}`, fix });
      continue;
    }
    if (!installed) {
      checks.push({ ok: false, what: `CRD ${name} is not installed`, fix });
      continue;
    }
    if (!installed.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) {
      checks.push({ ok: false, what: `CRD ${name} is not Established`, fix: `kubectl describe crd ${name}` });
      continue;
    }
    const stale = expected.spec.versions.filter((v) => {
      const got = installed.spec.versions.find((i) => i.name === v.name);
      return !got?.served || !covers(got.schema, v.schema);
    });
    const versions = expected.spec.versions.map((v) => v.name).join(", ");
    checks.push(
      stale.length === 0
        ? { ok: true, what: `CRD ${name} (${versions}) is kubefn ${version}'s` }
        : {
            ok: false,
            what: `CRD ${name} ${stale.map((v) => v.name).join(", ")} is not kubefn ${version}'s (an older or changed schema)`,
            fix,
          },
    );
  }
  return checks;
}

interface CoreEvent {
  reason?: string;
  message?: string;
  reportingComponent?: string;
}

/**
 * The intake check: creates canary ConfigMap kubefn-system/kubefn-intake-canary-<nonce>, polls
 * its Events every `pollMs` until intake's `IntakeReceived` Event arrives or `timeoutSeconds`
 * pass, then deletes the canary (its Events expire with the API server's event TTL).
 *
 * Caveats: the user needs create and delete on ConfigMaps and list on Events in kubefn-system.
 * A relay that batches and an audit webhook that buffers deliver within seconds; an audit log
 * export (CloudWatch Logs, Pub/Sub) can take a minute or more: raise `--intake-timeout` there.
 */
export async function intakeCheck(
  cluster: Cluster,
  opts: { timeoutSeconds: number; nonce: string; pollMs?: number },
): Promise<Check> {
  const name = `${INTAKE_CANARY_PREFIX}${opts.nonce}`;
  const ns = INTAKE_CANARY_NAMESPACE;
  const configMaps = `/api/v1/namespaces/${ns}/configmaps`;
  await cluster.call("POST", configMaps, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ns, labels: { "app.kubernetes.io/component": "intake-canary" } },
    data: { purpose: "kubefn doctor: does intake receive events? Deleted when the check ends." },
  });
  const selector = encodeURIComponent(
    `involvedObject.kind=ConfigMap,involvedObject.name=${name},reason=${INTAKE_RECEIVED_REASON}`,
  );
  const started = Date.now();
  let received: CoreEvent | undefined;
  try {
    for (;;) {
      const list = await cluster.call<{ items: CoreEvent[] }>(
        "GET",
        `/api/v1/namespaces/${ns}/events?fieldSelector=${selector}`,
      );
      received = list.items.find((e) => e.reportingComponent === INTAKE_CANARY_CONTROLLER);
      if (received || Date.now() - started >= opts.timeoutSeconds * 1000) break;
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
    }
  } finally {
    await cluster.call("DELETE", `${configMaps}/${name}`).catch(() => undefined);
  }
  const seconds = Math.max(1, Math.ceil((Date.now() - started) / 1000));
  if (received) {
    const from = /from (.*)$/.exec(received.message ?? "")?.[1] ?? "an event source";
    return { ok: true, what: `intake received the intake canary's creation from ${from} (${seconds} s)` };
  }
  return {
    ok: false,
    what: `intake did not acknowledge the intake canary ConfigMap ${ns}/${name} within ${opts.timeoutSeconds} s: nothing delivers the cluster's changes to kubefn`,
    fix: "run the relay (kubefn install --relay [--intake-url <kubefn's /v1/events>]: it signs with relay-secret of Secret kubefn-system/kubefn-intake, which kubefn's RELAY_SECRET must equal) or point the API server's audit webhook at kubefn's /v1/events (docs/deploying/README.md); its log and kubefn_intake_rejected_total say why a batch was refused",
  };
}

/** `ok   what` or `fail what — fix`, one per check. */
export const formatChecks = (checks: Check[]): string =>
  checks.map((c) => (c.ok ? `ok   ${c.what}` : `fail ${c.what}${c.fix ? ` — ${c.fix}` : ""}`)).join("\n");

/**
 * The clusters `--clusters` names: a comma-separated list of kubeconfig contexts, or `@<file>`, a
 * `KUBEFN_CLUSTERS` file, whose declared names are then the contexts (each cluster checked as the
 * user, through the context of its name; the file's credentials, kubefn's own, are not used).
 */
export function fleetNames(value: string): { names: string[] } | { error: string } {
  if (value.startsWith("@")) {
    let text: string;
    try {
      text = readFileSync(value.slice(1), "utf8");
    } catch (err) {
      return { error: `--clusters ${value}: ${err instanceof Error ? err.message : String(err)}` };
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { error: `--clusters ${value}: not a JSON list of clusters (KUBEFN_CLUSTERS)` };
    }
    const parsed = clustersSchema.safeParse(json);
    if (!parsed.success) return { error: `--clusters ${value}: ${z.prettifyError(parsed.error)}` };
    return parsed.data.length > 0
      ? { names: parsed.data.map((c) => c.name) }
      : { error: `--clusters ${value}: no cluster` };
  }
  const names = value
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  if (names.length === 0) return { error: "--clusters needs at least one kubeconfig context" };
  if (new Set(names).size !== names.length) return { error: "--clusters names a context twice" };
  return { names };
}

/** A cluster doctor could not check at all (its context missing, its API server down): one failed check. */
export function unreachable(cluster: string, err: unknown): Check {
  return {
    ok: false,
    what: `cannot check cluster ${cluster}: ${err instanceof Error ? err.message : String(err)}`,
    fix: `check that your kubeconfig has a context named ${cluster} and that its API server answers (kubectl --context ${cluster} get --raw /readyz)`,
  };
}

/**
 * A fleet's report: each cluster's checks under `cluster <name>` with its own summary, then one
 * line for the fleet naming the clusters that are not ready.
 */
export function formatFleetChecks(results: readonly { cluster: string; checks: Check[] }[]): {
  text: string;
  ok: boolean;
} {
  const notReady = results.filter((r) => r.checks.some((c) => !c.ok)).map((r) => r.cluster);
  const sections = results.map(({ cluster, checks }) => {
    const failed = checks.filter((c) => !c.ok).length;
    const summary =
      failed === 0
        ? `${cluster}: all ${checks.length} checks passed`
        : `${cluster}: ${failed} of ${checks.length} checks failed`;
    return `cluster ${cluster}\n${formatChecks(checks)}\n${summary}`;
  });
  const fleet =
    notReady.length === 0
      ? `${results.length} clusters: all ready`
      : `${results.length} clusters: ${results.length - notReady.length} ready, ${notReady.length} not (${notReady.join(", ")})`;
  return { text: `${sections.join("\n\n")}\n\n${fleet}`, ok: notReady.length === 0 };
}
