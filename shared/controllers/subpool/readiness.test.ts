import { describe, expect, it } from "vitest";
import type { Condition, KubeObject } from "../../kube/index.ts";
import { SubPoolReason as Reason } from "./api.ts";
import { subPoolReadiness } from "./status.ts";

const pool = (ready?: Pick<Condition, "status" | "reason">): KubeObject => ({
  apiVersion: "subrelay.example.com/v1alpha1",
  kind: "SubPool",
  metadata: { name: "demo-pool", generation: 3 },
  status: {
    conditions: ready
      ? [
          {
            type: "Ready",
            ...ready,
            message: "why",
            observedGeneration: 3,
            lastTransitionTime: "2026-11-30T11:00:00Z",
          },
        ]
      : [],
  },
});

describe("subPoolReadiness", () => {
  it.each<[string, Pick<Condition, "status" | "reason"> | undefined, string]>([
    ["no Ready yet", undefined, "Unknown/Pending/reconciling"],
    ["ready", { status: "True", reason: Reason.Ready }, "True/Ready/settled"],
    [
      "StatefulSet starting",
      { status: "False", reason: Reason.StatefulSetNotReady },
      "False/StatefulSetNotReady/reconciling",
    ],
    [
      "route not yet accepted",
      { status: "False", reason: Reason.RouteNotReady },
      "False/RouteNotReady/reconciling",
    ],
    [
      "Namespace terminating",
      { status: "False", reason: Reason.NamespaceTerminating },
      "False/NamespaceTerminating/reconciling",
    ],
    [
      "deletion waiting on the Namespace",
      { status: "False", reason: Reason.DeletionBlocked },
      "False/DeletionBlocked/reconciling",
    ],
    ["invalid spec", { status: "False", reason: Reason.InvalidSpec }, "False/InvalidSpec/stalled"],
    [
      "over the envelope",
      { status: "False", reason: Reason.ResourceEnvelopeExceeded },
      "False/ResourceEnvelopeExceeded/stalled",
    ],
    [
      "Gateway config incomplete",
      { status: "False", reason: Reason.GatewayConfigIncomplete },
      "False/GatewayConfigIncomplete/stalled",
    ],
    [
      "bad operator config",
      { status: "False", reason: Reason.InvalidOperatorConfig },
      "False/InvalidOperatorConfig/stalled",
    ],
    [
      "Namespace owned by someone else (retried)",
      { status: "False", reason: Reason.NamespaceConflict },
      "False/NamespaceConflict/settled",
    ],
    [
      "shared proxy gateway down",
      { status: "False", reason: Reason.ProxyGatewayNotReady },
      "False/ProxyGatewayNotReady/settled",
    ],
    [
      "suspended, as the seed has it",
      { status: "False", reason: Reason.Suspended },
      "False/Suspended/settled",
    ],
  ])("%s → %s", (_name, ready, want) => {
    const r = subPoolReadiness(pool(ready));
    expect(`${r.status}/${r.reason}/${r.progress}`).toBe(want);
    if (ready) expect(r.message).toBe("why");
  });
});
