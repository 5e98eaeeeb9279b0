import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../kube/port.ts";
import { routeState } from "./reconcile.ts";

const fixture = (name: string) =>
  JSON.parse(
    readFileSync(new URL(`../../../test/fixtures/gateway/${name}`, import.meta.url), "utf8"),
  ) as KubeObject;
const route = fixture("httproute-accepted-nginx-gateway-fabric.json");
const gateway = fixture("gateway-programmed-istio.json");
const cafe = { name: "cafe", namespace: "default" };

describe("RouteReady from real Gateway API statuses", () => {
  it("a real Accepted HTTPRoute status (NGINX Gateway Fabric) under a Programmed Gateway is accepted", () => {
    expect(routeState(route, cafe, gateway)).toEqual({
      state: "accepted",
      message: "accepted by Gateway default/cafe",
    });
  });

  it("the Gateway's own status is read: an accepted route under a Gateway that is not Programmed is pending", () => {
    const unprogrammed = structuredClone(gateway) as KubeObject & {
      status: { conditions: { type: string; status: string; message: string }[] };
    };
    const programmed = unprogrammed.status.conditions.find((c) => c.type === "Programmed")!;
    programmed.status = "False";
    programmed.message = "no addresses assigned";
    expect(routeState(route, cafe, unprogrammed)).toEqual({
      state: "pending",
      message:
        "accepted by Gateway default/cafe, which is not ready (Programmed=False: no addresses assigned)",
    });
  });

  it("a Gateway that does not exist carries no traffic", () => {
    expect(routeState(route, cafe, null)).toEqual({
      state: "pending",
      message: "Gateway default/cafe does not exist",
    });
  });

  it("the parent entry must be ours: the same route judged for another Gateway is pending", () => {
    expect(routeState(route, { name: "tea", namespace: "default" }, gateway)).toEqual({
      state: "pending",
      message: "not yet accepted by Gateway default/tea",
    });
  });

  it("a parentRef without a namespace means the route's own namespace", () => {
    const noNamespace = structuredClone(route) as KubeObject & {
      status: { parents: { parentRef: Record<string, string> }[] };
    };
    delete noNamespace.status.parents[0]!.parentRef.namespace;
    expect(routeState(noNamespace, cafe, gateway).state).toBe("accepted");
  });
});
