import { quantityPattern } from "../kube/index.ts";
import * as z from "../zod/index.ts";

/**
 * A Kubernetes resource quantity ("500m", "1Gi", or a bare integer such as `cpu: 2`), rendered as
 * `x-kubernetes-int-or-string` exactly like corev1 resource fields.
 *
 * Caveats: only the syntax is checked; sums and comparisons belong in the reconciler.
 */
export function quantitySchema() {
  return z.union([z.int().check(z.gte(0)), z.string().check(z.regex(quantityPattern))]);
}

export type Quantity = z.infer<ReturnType<typeof quantitySchema>>;
