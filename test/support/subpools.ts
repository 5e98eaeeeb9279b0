import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import type { KubeObject } from "../../shared/kube/port.ts";

export const poolUid = "5e1f0c2a-0000-4000-8000-000000000001";

/** A valid Internal-mode SubPool "demo" as the API server would return it (test fixture). */
export function subPoolObject(
  spec: Record<string, unknown> = {},
  metadata: Partial<KubeObject["metadata"]> = {},
): KubeObject {
  return {
    apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
    kind: "SubPool",
    metadata: { name: "demo", uid: poolUid, generation: 1, ...metadata },
    spec: {
      exposure: { mode: "Internal" },
      storage: { size: "10Gi" },
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "500m", memory: "512Mi" } } },
      cpaManager: {
        image: "ghcr.io/subrelay/cpa-manager:1.4.0",
        resources: { requests: { cpu: "250m", memory: "256Mi" } },
      },
      suspend: false,
      ...spec,
    },
  };
}
