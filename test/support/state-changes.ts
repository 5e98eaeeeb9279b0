/**
 * One of each state change users route (shared/runtime/core/state-changes.ts), as the controllers' own
 * functions find them between two statuses: the platform tests publish these to their sinks.
 */
import { admissionGateClosed } from "../../shared/app/state-changes.ts";
import { proxyStateChanges } from "../../shared/controllers/proxy/state-changes.ts";
import { siteStateChanges } from "../../shared/controllers/site/state-changes.ts";
import { subPoolStateChanges } from "../../shared/controllers/subpool/state-changes.ts";
import type { Condition, KubeObject } from "../../shared/kube/index.ts";
import type { StateChange } from "../../shared/runtime/index.ts";

export const NOW = new Date("2026-12-03T12:00:00Z");

export const condition = (type: string, status: Condition["status"], reason: string): Condition => ({
  type,
  status,
  reason,
  message: `${type} is ${status}`,
  lastTransitionTime: NOW.toISOString(),
});
const object = (
  kind: string,
  conditions: Condition[],
  extra: Record<string, unknown> = {},
  namespace: string | null = "ns1",
): KubeObject => ({
  apiVersion: "example.kubefn.dev/v1",
  kind,
  metadata: {
    name: `${kind.toLowerCase()}-1`,
    ...(namespace ? { namespace } : {}),
    uid: `uid-${kind}`,
    generation: 2,
  },
  status: { conditions, ...extra },
});

/** One of each listed change, as the controllers' own functions find them. */
export function everyChange(): StateChange[] {
  return [
    ...proxyStateChanges(
      object("Proxy", [condition("Ready", "Unknown", "Provisioning")]),
      object("Proxy", [condition("Ready", "True", "Ready")]),
      NOW,
    ),
    ...proxyStateChanges(
      object("Proxy", [condition("Healthy", "True", "ProbeSucceeded")]),
      object("Proxy", [condition("Healthy", "False", "ProbeFailed")]),
      NOW,
    ),
    ...proxyStateChanges(
      object("Proxy", [condition("Provisioned", "True", "Running")], { providerID: "i-0old" }),
      object("Proxy", [condition("Provisioned", "False", "Replacing")], { providerID: "i-0old" }),
      NOW,
    ),
    ...subPoolStateChanges(
      object("SubPool", [condition("Ready", "False", "StatefulSetNotReady")], {}, null),
      object("SubPool", [condition("Ready", "True", "Ready")], {}, null),
      NOW,
    ),
    ...subPoolStateChanges(
      object("SubPool", [condition("Ready", "Unknown", "Pending")], {}, null),
      object("SubPool", [condition("Ready", "False", "NamespaceConflict")], {}, null),
      NOW,
    ),
    ...siteStateChanges(["IngressReady"])(
      object("Site", [condition("IngressReady", "True", "Ready")]),
      object("Site", [condition("IngressReady", "False", "DeploymentFailed")]),
      NOW,
    ),
    admissionGateClosed(["ValidatingAdmissionPolicy kubefn-writes is missing"], NOW),
  ];
}
