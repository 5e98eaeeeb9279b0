import { classifyError, type Kube, type KubeObject } from "../../kube/index.ts";
import {
  REQUIRED_ADMISSION_POLICIES,
  ValidatingAdmissionPolicies,
  ValidatingAdmissionPolicyBindings,
} from "./required.ts";

/** One required policy or binding and whether it is in place. */
export interface AdmissionItem {
  kind: "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding";
  name: string;
  ok: boolean;
  /** Why not, e.g. `is not installed`, `does not deny (validationActions: Audit)`. */
  problem?: string;
}

/** What one check found: ready when every item is ok. */
export interface AdmissionReport {
  ready: boolean;
  items: AdmissionItem[];
  /** Set when the check itself failed (the lists were refused or unreachable): not ready. */
  error?: string;
  /**
   * The API server gave no answer (5xx, 429, a timeout, the client's open circuit): the check says
   * nothing about the policies. A refusal (403) or a kind not served is an answer.
   */
  unanswered?: boolean;
}

type Binding = KubeObject & { spec?: { policyName?: string; validationActions?: string[] } };

async function listAll(kube: Pick<Kube, "list">, resource: typeof ValidatingAdmissionPolicies) {
  const items: KubeObject[] = [];
  let next: string | undefined;
  do {
    const page = await kube.list(resource, next ? { continue: next } : {});
    items.push(...page.items);
    next = page.continue;
  } while (next);
  return items;
}

/**
 * Whether every required admission policy ({@link REQUIRED_ADMISSION_POLICIES}) is installed and
 * bound by its binding (same name, naming the policy, `Deny` among its validationActions). Two
 * list requests (policies, bindings), whatever the number of objects kubefn manages.
 *
 * Caveats: a failure to list (403 without the RBAC of infra/rbac/kubefn.yaml, an unreachable API
 * server) is reported as not ready with `error`, never thrown: kubefn fails closed.
 */
export async function checkAdmissionPolicies(kube: Pick<Kube, "list">): Promise<AdmissionReport> {
  let policies: KubeObject[];
  let bindings: Binding[];
  try {
    [policies, bindings] = await Promise.all([
      listAll(kube, ValidatingAdmissionPolicies),
      listAll(kube, ValidatingAdmissionPolicyBindings) as Promise<Binding[]>,
    ]);
  } catch (err) {
    return {
      ready: false,
      items: [],
      error: err instanceof Error ? err.message : String(err),
      ...(classifyError(err).class === "transient" ? { unanswered: true } : {}),
    };
  }
  const policyNames = new Set(policies.map((p) => p.metadata.name));
  const items: AdmissionItem[] = [];
  for (const name of REQUIRED_ADMISSION_POLICIES) {
    items.push(
      policyNames.has(name)
        ? { kind: "ValidatingAdmissionPolicy", name, ok: true }
        : { kind: "ValidatingAdmissionPolicy", name, ok: false, problem: "is not installed" },
    );
    const binding = bindings.find((b) => b.metadata.name === name);
    const actions = binding?.spec?.validationActions ?? [];
    items.push(
      !binding
        ? { kind: "ValidatingAdmissionPolicyBinding", name, ok: false, problem: "is not installed" }
        : binding.spec?.policyName !== name
          ? {
              kind: "ValidatingAdmissionPolicyBinding",
              name,
              ok: false,
              problem: `binds ${binding.spec?.policyName ?? "no policy"}, not ${name}`,
            }
          : !actions.includes("Deny")
            ? {
                kind: "ValidatingAdmissionPolicyBinding",
                name,
                ok: false,
                problem: `does not deny (validationActions: ${actions.join(",") || "none"})`,
              }
            : { kind: "ValidatingAdmissionPolicyBinding", name, ok: true },
    );
  }
  return { ready: items.every((i) => i.ok), items };
}

/** The report's problems, one phrase each (`ValidatingAdmissionPolicyBinding x is not installed`). */
export function admissionProblems(report: AdmissionReport): string[] {
  if (report.error !== undefined) return [`the admission policies could not be read: ${report.error}`];
  return report.items.filter((i) => !i.ok).map((i) => `${i.kind} ${i.name} ${i.problem}`);
}
