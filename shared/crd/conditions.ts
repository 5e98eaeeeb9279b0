import * as z from "zod";

/**
 * metav1.Condition, with the same validation the upstream type carries, so a status written by
 * the original Go operator round-trips unchanged.
 */
export const conditionSchema = z.object({
  type: z
    .string()
    .max(316)
    .regex(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
    )
    .describe("type of condition in CamelCase or in foo.example.com/CamelCase."),
  status: z
    .enum(["True", "False", "Unknown"])
    .describe("status of the condition, one of True, False, Unknown."),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .describe("the .metadata.generation that the condition was set based upon."),
  lastTransitionTime: z.iso
    .datetime({ offset: true })
    .describe("the last time the condition transitioned from one status to another."),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
    .describe("a programmatic identifier indicating the reason for the condition's last transition."),
  message: z
    .string()
    .max(32768)
    .describe("a human readable message indicating details about the transition."),
});

export type Condition = z.infer<typeof conditionSchema>;

/**
 * A `status.conditions` list: a map-list keyed by `type`, so server-side apply merges conditions
 * per type instead of replacing the list.
 *
 * @param types the condition types this kind publishes, listed in the field's description.
 */
export function conditionsSchema(types: readonly string[]) {
  const documented = types.length > 0 ? ` Known types: ${types.join(", ")}.` : "";
  return z
    .array(conditionSchema)
    .max(32)
    .meta({
      description: `Conditions describe the current state of the object.${documented}`,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    });
}
