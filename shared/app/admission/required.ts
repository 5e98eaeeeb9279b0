import { type AnyOperator, operators } from "../../controllers/index.ts";
import type { Resource } from "../../kube/index.ts";

/** The policies that contain every write of kubefn's, whatever the operator. */
const KUBEFN_ADMISSION_POLICIES = [
  "kubefn-writes-only-its-own",
  "kubefn-never-edits-specs",
  "kubefn-references-need-access",
  "kubefn-state-is-kubefns",
  "kubefn-primaries-keep-their-owners",
  "kubefn-allow-lists-are-the-installers",
  "kubefn-intake-writes",
] as const;

/** kubefn's own admission policies and those each operator of `list` declares, in list order. */
export function admissionPoliciesOf(list: readonly AnyOperator[]): readonly string[] {
  return [...KUBEFN_ADMISSION_POLICIES, ...list.flatMap((o) => o.cluster.admissionPolicies ?? [])];
}

/**
 * The ValidatingAdmissionPolicies kubefn's containment depends on (infra/rbac/admission-policy.yaml
 * and admission-policy-shapes.yaml), each bound by a ValidatingAdmissionPolicyBinding of the same
 * name that denies: kubefn's own and each operator's (`cluster.admissionPolicies`). kubefn
 * reconciles only while every one is installed and bound; `kubefn doctor` checks the same list.
 * A unit test holds it equal to the files.
 */
export const REQUIRED_ADMISSION_POLICIES: readonly string[] = admissionPoliciesOf(operators);

export const ValidatingAdmissionPolicies: Resource = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  resource: "validatingadmissionpolicies",
  kind: "ValidatingAdmissionPolicy",
  namespaced: false,
};

export const ValidatingAdmissionPolicyBindings: Resource = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  resource: "validatingadmissionpolicybindings",
  kind: "ValidatingAdmissionPolicyBinding",
  namespaced: false,
};
