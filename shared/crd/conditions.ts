import * as z from "../zod/index.ts";
import type { FieldNote } from "./meta.ts";

/**
 * metav1.Condition, with the same validation the upstream type carries, so a status written by
 * the original Go operator round-trips unchanged.
 */
export const conditionSchema = z.object({
  type: z
    .string()
    .check(z.maxLength(316))
    .check(
      z.regex(
        /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
      ),
    ),
  status: z.enum(["True", "False", "Unknown"]),
  observedGeneration: z.optional(z.int().check(z.gte(0))),
  lastTransitionTime: z.iso.datetime({ offset: true }),
  reason: z
    .string()
    .check(z.minLength(1))
    .check(z.maxLength(1024))
    .check(z.regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)),
  message: z.string().check(z.maxLength(32768)),
});

export type Condition = z.infer<typeof conditionSchema>;

/**
 * A `status.conditions` list. In the CRD it is a map-list keyed by `type` ({@link conditionsNotes}),
 * so server-side apply merges conditions per type instead of replacing the list.
 */
export function conditionsSchema() {
  return z.array(conditionSchema).check(z.maxLength(32));
}

/**
 * The CRD's notes on a conditions field (for `documented`, in a controller's crd.ts): a map-list
 * keyed by `type`, the upstream descriptions of metav1.Condition, and the condition types the kind
 * publishes.
 */
export function conditionsNotes(field: string, types: readonly string[]): Record<string, FieldNote> {
  const documented = types.length > 0 ? ` Known types: ${types.join(", ")}.` : "";
  return {
    [field]: {
      description: `Conditions describe the current state of the object.${documented}`,
      listMapKeys: ["type"],
    },
    [`${field}.type`]: "type of condition in CamelCase or in foo.example.com/CamelCase.",
    [`${field}.status`]: "status of the condition, one of True, False, Unknown.",
    [`${field}.observedGeneration`]: "the .metadata.generation that the condition was set based upon.",
    [`${field}.lastTransitionTime`]: "the last time the condition transitioned from one status to another.",
    [`${field}.reason`]:
      "a programmatic identifier indicating the reason for the condition's last transition.",
    [`${field}.message`]: "a human readable message indicating details about the transition.",
  };
}

/**
 * A kind's own condition types followed by the summary every primary carries (Ready, Reconciling,
 * Stalled; shared/runtime readiness.ts), each once: the types its CRD documents.
 */
export function withSummary(types: readonly string[]): string[] {
  return [...new Set([...types, "Ready", "Reconciling", "Stalled"])];
}
