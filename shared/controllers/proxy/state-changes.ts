import type { KubeObject } from "../../kube/index.ts";
import {
  changedCondition,
  conditionChange,
  type StateChange,
  StateChangeType,
  SummaryConditionType,
} from "../../runtime/index.ts";
import { ProxyConditionType, ProxyReason } from "./api.ts";

/**
 * A Proxy's state changes (pure): `Proxy Ready` when Ready turns True, `Proxy Unhealthy` when
 * Healthy turns False, `Proxy Instance Replaced` when Provisioned turns to Replacing (the old
 * instance, named in `detail.instance.replaced`, is being deleted; a new one follows).
 */
export function proxyStateChanges(before: KubeObject, after: KubeObject, at: Date): StateChange[] {
  const changes: StateChange[] = [];
  const ready = changedCondition(before, after, SummaryConditionType.Ready);
  if (ready?.status === "True") changes.push(conditionChange(StateChangeType.ProxyReady, after, ready, at));
  const healthy = changedCondition(before, after, ProxyConditionType.Healthy);
  if (healthy?.status === "False") {
    changes.push(conditionChange(StateChangeType.ProxyUnhealthy, after, healthy, at));
  }
  const provisioned = changedCondition(before, after, ProxyConditionType.Provisioned);
  if (provisioned?.reason === ProxyReason.Replacing) {
    const replaced = (before.status as { providerID?: unknown } | undefined)?.providerID;
    changes.push(
      conditionChange(
        StateChangeType.ProxyInstanceReplaced,
        after,
        provisioned,
        at,
        typeof replaced === "string" && replaced ? { instance: { replaced } } : {},
      ),
    );
  }
  return changes;
}
