import type { Resource } from "../kube/index.ts";
import type { AnyOperator } from "./operator.ts";
import { proxyOperator } from "./proxy/index.ts";
import { siteOperator } from "./site/index.ts";
import { subPoolOperator } from "./subpool/index.ts";

export {
  type AllowListEntry,
  type AnyOperator,
  type AuditRule,
  type CrdModule,
  defineOperator,
  type ManifestDirectory,
  type ManifestOption,
  type MetricFamilies,
  type MetricFamily,
  type Operator,
  type OperatorAllowLists,
  type OperatorCluster,
  type OperatorOptions,
  type OperatorParts,
  type OperatorSettingRange,
  type OperatorSettingsDeclaration,
  type RbacRole,
  type RbacRule,
  type SettingsByName,
  type SettingsOf,
  type VariablesOf,
} from "./operator.ts";

/**
 * The operators kubefn runs, each one module (`<name>/operator.ts`): the proxy operator (seed
 * 000), SubPool (seed 003) and the Site component registry (seed 004). Everything that lists
 * operators — the registry, the settings schema, the relay's kinds, the CRDs, and the RBAC, audit,
 * relay and Argo CD manifests (`npm run gen:cluster`) — is read from here: a new operator is one
 * folder and one line.
 */
export const operators = [proxyOperator, subPoolOperator, siteOperator] as const;

/** The operators' type, for settings by name. */
export type Operators = typeof operators;

/**
 * Every kind the operators read, per controller — each one's primary, owned and watched kinds —
 * without building them: the relay list-watches these.
 */
export function controllerKinds(
  list: readonly AnyOperator[] = operators,
): { controller: string; kinds: readonly Resource[]; readinessFrom?: readonly Resource[] }[] {
  return list.map((o) => ({
    controller: o.name,
    kinds: o.kinds,
    ...(o.readinessFrom ? { readinessFrom: o.readinessFrom } : {}),
  }));
}
