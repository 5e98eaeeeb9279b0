import type { KubeObject } from "../../kube/index.ts";

/** kubefn's identity in a default install: the kubefn-system/kubefn ServiceAccount. */
export const DEFAULT_IDENTITY = "system:serviceaccount:kubefn-system:kubefn";

/** The name of the matchCondition by which a policy picks kubefn's writes out of everyone's. */
export const IDENTITY_CONDITION = "kubefn-identity";

/** The installer's ConfigMap of who may write kubefn's status (policy `kubefn-state-is-kubefns`). */
export const STATUS_WRITERS = { namespace: "kubefn-system", name: "kubefn-status-writers" } as const;

const quoted = /'((?:[^'\\]|\\.)*)'/g;

function celString(username: string): string {
  if (username === "" || /['\\\n]/.test(username)) {
    throw new Error(
      `kubefn identity ${JSON.stringify(username)}: a username may not be empty nor hold ' or \\`,
    );
  }
  return `'${username}'`;
}

/**
 * The CEL of the `kubefn-identity` matchCondition that contains exactly `usernames`: every
 * admission policy in infra/rbac matches kubefn's writes by it, so one list (the setting
 * `SELF_USERNAMES`) says which identities are held to kubefn's shape, whichever way kubefn
 * authenticates (ServiceAccount, EKS role, Google account, its own OIDC issuer).
 *
 * @example
 * identityCondition(["system:serviceaccount:kubefn-system:kubefn", "kubefn-oidc:kubefn"])
 * // "request.userInfo.username in ['system:serviceaccount:kubefn-system:kubefn', 'kubefn-oidc:kubefn']"
 */
export function identityCondition(usernames: readonly string[]): string {
  if (usernames.length === 0) throw new Error("kubefn needs at least one identity");
  return `request.userInfo.username in [${usernames.map(celString).join(", ")}]`;
}

/** The usernames a `kubefn-identity` expression names (its quoted strings), in order. */
export function identitiesIn(expression: string): string[] {
  return [...expression.matchAll(quoted)].map((m) => m[1] ?? "");
}

type Policy = KubeObject & {
  spec?: { matchConditions?: Array<{ name: string; expression: string }> };
};

/** The identities a ValidatingAdmissionPolicy contains, or undefined when it has no such condition. */
export function identitiesOf(policy: KubeObject): string[] | undefined {
  const condition = (policy as Policy).spec?.matchConditions?.find((c) => c.name === IDENTITY_CONDITION);
  return condition ? identitiesIn(condition.expression) : undefined;
}

/** The status writers' entries for `usernames`: `kubefn` for the first, `kubefn-2`, … after it. */
export function statusWritersFor(usernames: readonly string[]): Record<string, string> {
  return Object.fromEntries(usernames.map((u, i) => [i === 0 ? "kubefn" : `kubefn-${i + 1}`, u]));
}

/**
 * `objects` (infra/rbac, or a release's install.yaml) for kubefn running as `usernames`: the
 * `kubefn-identity` condition of every admission policy names them, and the ConfigMap
 * kubefn-system/kubefn-status-writers lists them. Pure; other objects are returned as they are.
 *
 * Caveats: the list replaces the files' (the ServiceAccount's name): leave the ServiceAccount in
 * it while kubefn still runs as it anywhere.
 */
export function withIdentities<T extends KubeObject>(
  objects: readonly T[],
  usernames: readonly string[],
): T[] {
  const expression = identityCondition(usernames);
  return objects.map((o) => {
    if (o.kind === "ValidatingAdmissionPolicy" && identitiesOf(o) !== undefined) {
      const spec = (o as Policy).spec ?? {};
      const matchConditions = (spec.matchConditions ?? []).map((c) =>
        c.name === IDENTITY_CONDITION ? { ...c, expression } : c,
      );
      return { ...o, spec: { ...spec, matchConditions } };
    }
    if (
      o.kind === "ConfigMap" &&
      o.metadata.name === STATUS_WRITERS.name &&
      o.metadata.namespace === STATUS_WRITERS.namespace
    ) {
      return { ...o, data: statusWritersFor(usernames) };
    }
    return o;
  });
}
