import { assertNever } from "../guards/index.ts";

/** metav1.LabelSelector. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface LabelSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

/**
 * `existing` with `ours` laid over it: keys others set are kept, only our keys are overridden.
 * Returns a new map and whether it differs from `existing`.
 */
export function mergeLabels(
  existing: Readonly<Record<string, string>> | undefined,
  ours: Readonly<Record<string, string>> | undefined,
): { labels: Record<string, string>; changed: boolean } {
  const labels = { ...(existing ?? {}) };
  let changed = false;
  for (const [key, value] of Object.entries(ours ?? {})) {
    if (labels[key] !== value) {
      labels[key] = value;
      changed = true;
    }
  }
  return { labels, changed };
}

/** Whether `labels` carries every key/value of `wanted` (extra labels do not matter). */
export function labelsMatch(
  labels: Readonly<Record<string, string>> | undefined,
  wanted: Readonly<Record<string, string>>,
): boolean {
  return Object.entries(wanted).every(([key, value]) => labels?.[key] === value);
}

/**
 * The `labelSelector` query string for a selector: `a=1,b=2` for labels, with `key in (x,y)`,
 * `key notin (x)`, `key` and `!key` for expressions. Keys are sorted so equal selectors give equal
 * strings.
 */
export function formatLabelSelector(selector: LabelSelector | Readonly<Record<string, string>>): string {
  const sel: LabelSelector = isLabelSelector(selector) ? selector : { matchLabels: { ...selector } };
  const parts = Object.entries(sel.matchLabels ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`);
  for (const req of sel.matchExpressions ?? []) {
    const values = [...(req.values ?? [])].sort().join(",");
    switch (req.operator) {
      case "In":
        parts.push(`${req.key} in (${values})`);
        break;
      case "NotIn":
        parts.push(`${req.key} notin (${values})`);
        break;
      case "Exists":
        parts.push(req.key);
        break;
      case "DoesNotExist":
        parts.push(`!${req.key}`);
        break;
      default:
        return assertNever(req.operator);
    }
  }
  return parts.join(",");
}

function isLabelSelector(value: object): value is LabelSelector {
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((k) => k === "matchLabels" || k === "matchExpressions");
}
