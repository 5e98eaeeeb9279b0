import type { Resource } from "../../kube/index.ts";

/**
 * The ValidatingAdmissionPolicies kubefn's containment depends on (infra/rbac/admission-policy.yaml
 * and admission-policy-shapes.yaml), each bound by a ValidatingAdmissionPolicyBinding of the same
 * name that denies. kubefn reconciles only while every one is installed and bound; `kubefn doctor`
 * checks the same list. A unit test holds it equal to the files.
 */
export const REQUIRED_ADMISSION_POLICIES: readonly string[] = [
  "kubefn-writes-only-its-own",
  "kubefn-never-edits-specs",
  "kubefn-references-need-access",
  "kubefn-state-is-kubefns",
  "kubefn-primaries-keep-their-owners",
  "kubefn-pods-are-proxy-instances",
  "kubefn-system-runs-site-components",
  "kubefn-subpools-run-their-shape",
  "kubefn-subpools-stay-within-limits",
  "kubefn-routes-serve-their-pools-hostname",
  "kubefn-allow-lists-are-the-installers",
];

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
