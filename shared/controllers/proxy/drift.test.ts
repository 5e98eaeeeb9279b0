import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../kube/index.ts";
import { proxyFinalizer } from "./api.ts";
import { notOptedIn, type ProxyDriftShared, proxyDriftReason } from "./drift.ts";
import { type Instance, NamespaceNotOptedInError } from "./providers/index.ts";

/** A Managed pod-provider Proxy whose Provisioned condition says `provisioned`. */
function managedProxy(provisioned: { status: "True" | "False"; reason: string }): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "team-a", name: "p", uid: "uid-p", generation: 1, finalizers: [proxyFinalizer] },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "init" } } },
    status: {
      observedGeneration: 1,
      conditions: [
        { type: "Provisioned", message: "", lastTransitionTime: "2026-11-30T12:00:00Z", ...provisioned },
      ],
    },
  };
}

function shared(
  instances: ReadonlyMap<string, Instance> | typeof notOptedIn,
  secret: "reads" | "refused",
): ProxyDriftShared {
  return {
    instancesIn: async () => instances,
    providers: new Set(["kubernetes"]),
    desiredHash: async (namespace) => {
      if (secret === "refused") throw new NamespaceNotOptedInError(namespace, "get cloud-init Secret");
      return "v2:hash";
    },
  };
}

const waiting = { status: "False", reason: "NamespaceNotOptedIn" } as const;
const running = { status: "True", reason: "Created" } as const;

describe("proxyDriftReason for a namespace's opt-in", () => {
  it.each([
    ["waits quietly while its namespace still refuses", waiting, notOptedIn, "refused", undefined],
    [
      "a running Proxy whose namespace stopped granting gets one pass to say so",
      running,
      notOptedIn,
      "refused",
      "namespace-not-opted-in",
    ],
    [
      "a pass once its namespace's instances list",
      waiting,
      new Map<string, Instance>(),
      "reads",
      "namespace-opted-in",
    ],
    [
      "quiet while its Secret is still refused (a provider outside the namespace)",
      waiting,
      new Map<string, Instance>(),
      "refused",
      undefined,
    ],
  ] as const)("%s", async (_, provisioned, instances, secret, reason) => {
    expect(await proxyDriftReason(managedProxy(provisioned), shared(instances, secret))).toBe(reason);
  });
});
