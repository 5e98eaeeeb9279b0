/**
 * Site events through the runtime's intake mapping (`mapEvents`) with the Site controller
 * registered: the primary, owned objects by ownerReference, the watched per-Site and shared configs.
 */
import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { createRegistry, mapEvents } from "../../runtime/index.ts";
import { siteResource } from "./api.ts";
import { defaultSiteRegistry } from "./components/index.ts";
import { siteController } from "./controller.ts";

const config = { imageRegistry: "r", imageTag: "t", apiServerEndpoint: "https://api" };
const registry = createRegistry([siteController({ registry: defaultSiteRegistry(), env: { config } })]);
const ns = "kubefn-system";
const owner = {
  apiVersion: "unbounded-cloud.io/v1alpha3",
  kind: "Site",
  name: "west",
  uid: "u1",
  controller: true,
};

const batch = (events: unknown[]) => ({ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events });
const event = (resource: { group: string; resource: string }, metadata: Record<string, unknown>) => ({
  type: "MODIFIED",
  resource: { ...resource, version: "v1" },
  object: { metadata },
});

describe("intake → Site requests", () => {
  const kube = new FakeKube();
  for (const name of ["east", "west"]) {
    kube.seed(siteResource, { apiVersion: "unbounded-cloud.io/v1alpha3", kind: "Site", metadata: { name } });
  }
  const { ctx } = fakeContext(kube);
  const names = async (events: unknown[]) =>
    (await mapEvents(ctx, registry, batch(events))).requests.map(
      (r) => `${r.controller}/${r.namespace ?? ""}/${r.name}`,
    );

  it.each<[string, unknown[], string[]]>([
    ["a Site", [event({ group: "unbounded-cloud.io", resource: "sites" }, { name: "west" })], ["site//west"]],
    [
      "an owned Deployment (controller reference)",
      [
        event(
          { group: "apps", resource: "deployments" },
          { name: "metalman-west", namespace: ns, ownerReferences: [owner] },
        ),
      ],
      ["site//west"],
    ],
    [
      "a per-Site override config",
      [event({ group: "", resource: "configmaps" }, { name: "metalman-config-west", namespace: ns })],
      ["site//west"],
    ],
    [
      "the shared net config → singleton and every Site",
      [event({ group: "", resource: "configmaps" }, { name: "net-config", namespace: ns })],
      ["site//__singletons", "site//east", "site//west"],
    ],
    [
      "an unrelated ConfigMap",
      [event({ group: "", resource: "configmaps" }, { name: "other", namespace: ns })],
      [],
    ],
  ])("%s", async (_name, events, expected) => {
    expect((await names(events)).sort()).toEqual(expected.sort());
  });
});
