import type { KubeObject } from "../../kube/index.ts";
import {
  changedCondition,
  conditionChange,
  type StateChange,
  type StateChangesOf,
  StateChangeType,
} from "../../runtime/index.ts";

/**
 * A Site's state changes (pure): `Site Component Changed` for each component condition (of
 * `componentTypes`) whose status or reason changed. A condition's first appearance (a new Site)
 * is not a change.
 */
export function siteStateChanges(componentTypes: readonly string[]): StateChangesOf {
  return (before: KubeObject, after: KubeObject, at: Date): StateChange[] =>
    componentTypes.flatMap((type) => {
      const changed = changedCondition(before, after, type);
      return changed?.previous
        ? [conditionChange(StateChangeType.SiteComponentChanged, after, changed, at)]
        : [];
    });
}
