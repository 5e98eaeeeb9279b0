/** metav1.Condition. */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  /** CamelCase, stable: other systems match on it. */
  reason: string;
  message: string;
  observedGeneration?: number;
  /** RFC 3339, whole seconds — moves only when `status` flips. */
  lastTransitionTime: string;
}

export type ConditionInput = Omit<Condition, "lastTransitionTime">;

/** metav1.Time serialises to whole seconds; writing milliseconds would read back different. */
export function formatKubeTime(at: Date): string {
  return `${at.toISOString().slice(0, 19)}Z`;
}

/** An object's `status.conditions`, when it has a list there. */
export function conditionsOf(object: object): Condition[] | undefined {
  const status = (object as { status?: unknown }).status;
  if (typeof status !== "object" || status === null) return undefined;
  const list = (status as { conditions?: unknown }).conditions;
  return Array.isArray(list) ? (list as Condition[]) : undefined;
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/** Longest condition message kept; longer ones are cut with "…" (the API allows 32768). */
export const maxConditionMessageLength = 2048;
/** Longest condition reason kept (the API allows 1024). */
const maxConditionReasonLength = 1024;

/**
 * `message` cut to {@link maxConditionMessageLength} characters. A message quoting a tenant's
 * input (a 40 kB probe URL) would otherwise make every status write a 422 and freeze the status.
 */
export function boundedMessage(message: string): string {
  const chars = Array.from(message);
  return chars.length <= maxConditionMessageLength
    ? message
    : `${chars.slice(0, maxConditionMessageLength - 1).join("")}…`;
}

/**
 * Sets one condition, as `meta.SetStatusCondition` does: a new entry is appended; an existing one
 * is replaced only when status, reason, message or observedGeneration changed; its
 * `lastTransitionTime` becomes `now` only when the status flips. Returns a new array and whether
 * anything changed, so a pass writes status only when `changed`.
 *
 * Caveats: an omitted `observedGeneration` removes one the existing entry had. The message is
 * cut to {@link maxConditionMessageLength} characters (see {@link boundedMessage}).
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: Date,
): { conditions: Condition[]; changed: boolean } {
  const next: ConditionInput = {
    ...input,
    reason: input.reason.slice(0, maxConditionReasonLength),
    message: boundedMessage(input.message),
  };
  const list = [...(conditions ?? [])];
  const index = list.findIndex((c) => c.type === next.type);
  const existing = index === -1 ? undefined : list[index];
  if (!existing) {
    list.push({ ...next, lastTransitionTime: formatKubeTime(now) });
    return { conditions: list, changed: true };
  }
  const same =
    existing.status === next.status &&
    existing.reason === next.reason &&
    existing.message === next.message &&
    existing.observedGeneration === next.observedGeneration;
  if (same) return { conditions: list, changed: false };
  const lastTransitionTime =
    existing.status === next.status ? existing.lastTransitionTime : formatKubeTime(now);
  const replaced: Condition = { ...next, lastTransitionTime };
  if (replaced.observedGeneration === undefined) delete replaced.observedGeneration;
  list[index] = replaced;
  return { conditions: list, changed: true };
}

/** Removes the condition of `type`, if present. */
export function removeCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): { conditions: Condition[]; changed: boolean } {
  const list = (conditions ?? []).filter((c) => c.type !== type);
  return { conditions: list, changed: list.length !== (conditions?.length ?? 0) };
}
