import { describe, expect, it } from "vitest";
import type { Condition, KubeObject } from "../../kube/index.ts";
import { ReconcileError } from "../../kube/index.ts";
import { done, failed, type Outcome } from "../../runtime/index.ts";
import type { ProxyStatus } from "./api.ts";
import { computePhase, proxyReadiness } from "./status.ts";

const cond = (type: string, status: Condition["status"], reason: string, generation?: number): Condition => ({
  type,
  status,
  reason,
  message: `${type} says ${reason}`,
  lastTransitionTime: "2026-11-30T11:00:00Z",
  ...(generation === undefined ? {} : { observedGeneration: generation }),
});

interface Shape {
  deleting?: boolean;
  generation?: number;
  healthChecked?: boolean;
  outcome?: Outcome;
}

function proxy(status: ProxyStatus, o: Shape): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      name: "p",
      namespace: "ns",
      generation: o.generation ?? 1,
      ...(o.deleting ? { deletionTimestamp: "2026-11-30T11:30:00Z" } : {}),
    },
    spec: {
      mode: "Managed",
      provider: "fake",
      ...(o.healthChecked ? { healthCheck: { probeURL: "https://example.com/" } } : {}),
    },
    status,
  };
}

const provisioned = cond("Provisioned", "True", "Created");

describe("proxyReadiness", () => {
  it.each<[string, ProxyStatus, Shape, string]>([
    ["nothing written yet", {}, {}, "Unknown/Pending/reconciling"],
    [
      "provisioning",
      { conditions: [cond("Provisioned", "False", "Provisioning")] },
      {},
      "False/Provisioning/reconciling",
    ],
    [
      "replacing",
      { conditions: [cond("Provisioned", "False", "Replacing")] },
      {},
      "False/Replacing/reconciling",
    ],
    [
      "cloud-init Secret missing: waits on the tenant, not on time",
      { conditions: [cond("Provisioned", "False", "CloudInitError")] },
      {},
      "False/CloudInitError/settled",
    ],
    [
      "quota refused",
      { conditions: [cond("QuotaExceeded", "True", "QuotaExceeded")] },
      {},
      "False/QuotaExceeded/settled",
    ],
    [
      "latched at this generation: the latch's own reason, Stalled",
      {
        conditions: [
          cond("PermanentError", "True", "UnknownProvider", 1),
          cond("Provisioned", "False", "PermanentError"),
        ],
      },
      {},
      "False/UnknownProvider/stalled",
    ],
    [
      "a latch of an older generation no longer counts",
      {
        conditions: [
          cond("PermanentError", "True", "Invalid", 1),
          cond("Provisioned", "False", "Provisioning"),
        ],
      },
      { generation: 2 },
      "False/Provisioning/reconciling",
    ],
    ["running, no health check", { conditions: [provisioned] }, {}, "True/Provisioned/settled"],
    [
      "running, health check without a verdict yet",
      { conditions: [provisioned] },
      { healthChecked: true },
      "Unknown/AwaitingHealthCheck/reconciling",
    ],
    [
      "running and probed healthy",
      { conditions: [provisioned, cond("Healthy", "True", "ProbeSucceeded")] },
      { healthChecked: true },
      "True/Healthy/settled",
    ],
    [
      "running and probed unhealthy: Healthy's reason",
      { conditions: [provisioned, cond("Healthy", "False", "ProbeFailed")] },
      { healthChecked: true },
      "False/ProbeFailed/settled",
    ],
    [
      "probe target refused",
      { conditions: [provisioned, cond("Healthy", "False", "ProbeTargetRefused")] },
      { healthChecked: true },
      "False/ProbeTargetRefused/settled",
    ],
    [
      "a capped probe timeout is a warning, not a failure",
      {
        conditions: [
          provisioned,
          cond("Healthy", "True", "ProbeSucceeded"),
          cond("ProbeTimeoutCapped", "True", "TimeoutOutOfRange"),
        ],
      },
      { healthChecked: true },
      "True/Healthy/settled",
    ],
    [
      "running while a quota condition lingers: the instance counts",
      { conditions: [provisioned, cond("QuotaExceeded", "True", "QuotaExceeded")] },
      {},
      "True/Provisioned/settled",
    ],
    ["being deleted", { conditions: [provisioned] }, { deleting: true }, "False/Deleting/reconciling"],
    [
      "a pass that ended well",
      { conditions: [provisioned] },
      { outcome: done() },
      "True/Provisioned/settled",
    ],
    [
      "an object the schema rejects: Stalled until an edit",
      { conditions: [provisioned] },
      { outcome: failed(ReconcileError.permanent("InvalidSpec", "spec.mode: Invalid option")) },
      "False/InvalidSpec/stalled",
    ],
  ])("%s → %s", (_name, status, o, want) => {
    const r = proxyReadiness(proxy(status, o), o.outcome);
    expect(r && `${r.status}/${r.reason}/${r.progress}`).toBe(want);
    // Ready agrees with the phase the fleet page and `kubectl get` show.
    const phase = computePhase(status, {
      deleting: o.deleting ?? false,
      generation: o.generation ?? 1,
      healthChecked: o.healthChecked ?? false,
    });
    if (o.outcome?.kind !== "error") expect(r?.status === "True").toBe(phase === "Ready");
  });

  it("quotes the failing condition's message", () => {
    const r = proxyReadiness(
      proxy({ conditions: [provisioned, cond("Healthy", "False", "ProbeFailed")] }, { healthChecked: true }),
    );
    expect(r?.message).toBe("Healthy says ProbeFailed");
  });
});
