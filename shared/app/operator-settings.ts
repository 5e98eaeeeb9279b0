/**
 * The operators' own settings, under the same names on every platform (Workers `[vars]` and
 * secrets, the Lambda environment, the Node host's environment): each operator declares its
 * variables and how it parses them (its `operator.ts`), and this loop gathers them. Parsed once,
 * at start; a platform spreads {@link operatorVariables} into its schema and turns the result into
 * {@link OperatorSettings} with {@link operatorSettingsFrom}.
 */

import {
  type AllowListEntry,
  type AnyOperator,
  type Operators,
  operators,
  type SettingsByName,
  type VariablesOf,
} from "../controllers/index.ts";
import { parseServiceAccountKey } from "../credentials/index.ts";
import type * as z from "../zod/index.ts";
import * as zod from "../zod/index.ts";

/** Every operator's variables of `list`, in the list's order. */
export function variablesOf<L extends readonly AnyOperator[]>(list: L): VariablesOf<L> {
  return Object.assign({}, ...list.map((o) => o.settings?.variables ?? {})) as VariablesOf<L>;
}

export const operatorVariables = variablesOf(operators);

export type OperatorVariables = z.infer<z.ZodMiniObject<typeof operatorVariables>>;

/** What {@link operatorSettingsFrom} gives `createOperators`: each operator's settings, by its name. */
export type OperatorSettings = SettingsByName<Operators>;

/**
 * Each operator's cross-field rules, in list order, and their settings by operator name. Returns
 * every problem, one line each, naming the variable; a credentials problem never echoes the
 * credentials.
 */
export function operatorSettingsFrom(
  e: OperatorVariables,
  selfUsernames: readonly string[],
): { ok: true; settings: OperatorSettings } | { ok: false; issues: string[] } {
  return settingsOf(operators, e, selfUsernames) as
    | { ok: true; settings: OperatorSettings }
    | { ok: false; issues: string[] };
}

/** {@link operatorSettingsFrom} over any list of operators. */
export function settingsOf(
  list: readonly AnyOperator[],
  values: Record<string, unknown>,
  selfUsernames: readonly string[],
): { ok: true; settings: Record<string, unknown> } | { ok: false; issues: string[] } {
  const issues: string[] = [];
  const settings: Record<string, unknown> = {};
  for (const operator of list) {
    if (!operator.settings) continue;
    const parsed = operator.settings.parse(values, selfUsernames);
    if (parsed.ok) settings[operator.name] = parsed.settings;
    else issues.push(...parsed.issues);
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, settings };
}

/**
 * The operators whose settings stop them (each says why on its primaries' Ready), with the reason.
 * The others run on.
 */
export function stoppedBySettings(
  settings: Readonly<Record<string, unknown>>,
  list: readonly AnyOperator[] = operators,
): { operator: string; problem: string }[] {
  return list.flatMap((operator) => {
    const own = settings[operator.name];
    const problem = own === undefined ? undefined : operator.settings?.invalid?.(own);
    return problem ? [{ operator: operator.name, problem }] : [];
  });
}

/**
 * The allow-list entries that admit what kubefn's settings ask its operators to run and serve
 * (pure): each operator's `allowLists.entries` of its settings, in list order. For a host that
 * installs kubefn itself.
 */
export function allowListEntriesFor(
  settings: Readonly<Record<string, unknown>>,
  list: readonly AnyOperator[] = operators,
): AllowListEntry[] {
  return list.flatMap((o) => {
    const own = settings[o.name];
    return own === undefined || !o.allowLists ? [] : o.allowLists.entries(own);
  });
}

/** Every operator's allow-list names (the ConfigMaps in kubefn-system their policies read). */
export function allowListNames(list: readonly AnyOperator[] = operators): readonly string[] {
  return list.flatMap((o) => o.allowLists?.names ?? []);
}

/** `KUBE_GOOGLE_CREDENTIALS` on Workers and Lambda: a service-account key whose tokens authenticate to GKE. */
export const kubeGoogleCredentialsSchema = zod
  .string()
  .check(
    zod.refine(
      (t) => parseServiceAccountKey(t) !== undefined,
      "KUBE_GOOGLE_CREDENTIALS must be a service-account key (JSON with client_email and private_key)",
    ),
  );

export { ownNamespace } from "../kube/index.ts";
