/**
 * What a tenant may ask kubefn's identity to run: the operator's allow-list of instance images,
 * machine types and zones. A Proxy that names anything else is refused before an instance is
 * created or replaced.
 */

import { ReconcileError } from "../../kube/index.ts";
import type { InstanceShape } from "./providers/index.ts";

/**
 * The operator's allow-list (`PROXY_ALLOWED_IMAGES`, `PROXY_ALLOWED_MACHINE_TYPES`; zones from
 * `GCE_ZONES`). An entry matches exactly, or by prefix when it ends in `*` (`*` alone admits
 * anything). A field the Proxy leaves out is the provider's own default and always admitted.
 */
export interface InstanceAllowList {
  images: readonly string[];
  machineTypes: readonly string[];
  /** Zones a Proxy may name; any when unset (the pod provider ignores zones). */
  zones?: readonly string[];
}

/**
 * kubefn's forward-proxy image (any tag or digest), Debian images on GCE, and the shared-core E2
 * machine types: what the examples and the providers' defaults use.
 */
export const defaultInstanceAllowList: InstanceAllowList = {
  images: ["ghcr.io/kubefn/forward-proxy:*", "ghcr.io/kubefn/forward-proxy@*", "projects/debian-cloud/*"],
  machineTypes: ["e2-micro", "e2-small", "e2-medium"],
};

/**
 * The refusal of a Proxy's instance shape, or undefined when the allow-list admits it (pure).
 *
 * @example
 * instanceRefusal({ image: "evil.example/x:1" }, defaultInstanceAllowList)?.reason; // "ImageNotAllowed"
 */
export function instanceRefusal(
  shape: InstanceShape | undefined,
  allow: InstanceAllowList,
): ReconcileError | undefined {
  const asked = { image: shape?.image, machineType: shape?.machineType, zone: shape?.zone };
  const lists = [allow.images, allow.machineTypes, allow.zones];
  for (const [i, [field, value]] of Object.entries(asked).entries()) {
    const list = lists[i];
    if (
      value === undefined ||
      !list ||
      list.some((e) => e === value || (e.endsWith("*") && value.startsWith(e.slice(0, -1))))
    ) {
      continue;
    }
    // ImageNotAllowed, MachineTypeNotAllowed, ZoneNotAllowed (see isAllowListRefusal).
    return ReconcileError.permanent(
      `${field[0]!.toUpperCase()}${field.slice(1)}NotAllowed`,
      `spec.instance.${field} ${JSON.stringify(value)} is not on the operator's allow-list (${list.join(", ") || "empty"})`,
    );
  }
  return undefined;
}

/** Whether a reason is one of {@link instanceRefusal}'s. */
export const isAllowListRefusal = (reason: string): boolean => reason.endsWith("NotAllowed");
