export {
  type AdmissionItem,
  type AdmissionReport,
  admissionProblems,
  checkAdmissionPolicies,
} from "./check.ts";
export {
  type AdmissionGate,
  type AdmissionGateOptions,
  type AdmissionState,
  CHECK_GIVEN_UP_SECONDS,
  createAdmissionGate,
} from "./gate.ts";
export {
  DEFAULT_IDENTITY,
  IDENTITY_CONDITION,
  identitiesOf,
  identityCondition,
  STATUS_WRITERS,
  statusWritersFor,
  withIdentities,
} from "./identities.ts";
export {
  REQUIRED_ADMISSION_POLICIES,
  ValidatingAdmissionPolicies,
  ValidatingAdmissionPolicyBindings,
} from "./required.ts";
