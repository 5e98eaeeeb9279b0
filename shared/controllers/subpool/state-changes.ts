import type { KubeObject } from "../../kube/index.ts";
import {
  changedCondition,
  conditionChange,
  type StateChange,
  StateChangeType,
  SummaryConditionType,
} from "../../runtime/index.ts";
import { SubPoolReason } from "./api.ts";

/** Ready=False reasons only an edit (of the SubPool, a conflicting object, the operator config) fixes. */
export const subPoolRefusals: ReadonlySet<string> = new Set([
  SubPoolReason.NamespaceConflict,
  SubPoolReason.CredentialConflict,
  SubPoolReason.ManagedResourceConflict,
  SubPoolReason.InvalidOperatorConfig,
  SubPoolReason.GatewayConfigIncomplete,
  SubPoolReason.InvalidSpec,
  SubPoolReason.ResourceEnvelopeExceeded,
  SubPoolReason.GatewayAPIMissing,
]);

/**
 * A SubPool's state changes (pure): `SubPool Ready` when Ready turns True, `SubPool Refused`
 * when it turns False for one of {@link subPoolRefusals} (waiting for a Pod is not a refusal).
 */
export function subPoolStateChanges(before: KubeObject, after: KubeObject, at: Date): StateChange[] {
  const ready = changedCondition(before, after, SummaryConditionType.Ready);
  if (ready?.status === "True") return [conditionChange(StateChangeType.SubPoolReady, after, ready, at)];
  if (ready?.status === "False" && subPoolRefusals.has(ready.reason)) {
    return [conditionChange(StateChangeType.SubPoolRefused, after, ready, at)];
  }
  return [];
}
