import * as z from "../zod/index.ts";
import { described, withMeta } from "./meta.ts";

/**
 * metav1.Condition, with the same validation the upstream type carries, so a status written by
 * the original Go operator round-trips unchanged.
 */
export const conditionSchema = z.object({
  type: described(
    z
      .string()
      .check(z.maxLength(316))
      .check(
        z.regex(
          /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
        ),
      ),
    "type of condition in CamelCase or in foo.example.com/CamelCase.",
  ),
  status: described(
    z.enum(["True", "False", "Unknown"]),
    "status of the condition, one of True, False, Unknown.",
  ),
  observedGeneration: described(
    z.optional(z.int().check(z.gte(0))),
    "the .metadata.generation that the condition was set based upon.",
  ),
  lastTransitionTime: described(
    z.iso.datetime({ offset: true }),
    "the last time the condition transitioned from one status to another.",
  ),
  reason: described(
    z
      .string()
      .check(z.minLength(1))
      .check(z.maxLength(1024))
      .check(z.regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)),
    "a programmatic identifier indicating the reason for the condition's last transition.",
  ),
  message: described(
    z.string().check(z.maxLength(32768)),
    "a human readable message indicating details about the transition.",
  ),
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
  return withMeta(z.array(conditionSchema).check(z.maxLength(32)), {
    description: `Conditions describe the current state of the object.${documented}`,
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
  });
}
