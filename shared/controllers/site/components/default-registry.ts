import type { KubeObject } from "../../../kube/index.ts";
import type { Registry } from "../component.ts";
import { machinaComponent } from "./machina.ts";
import { metalmanComponent } from "./metalman.ts";
import { netComponent } from "./net.ts";
import { storageComponent } from "./storage.ts";

/**
 * The sample registry: net and machina (cluster), then metalman and storage (per Site).
 * Conditions appear on every Site in this order: NetReady, MachinaReady, MetalmanReady,
 * StorageReady. `manifests` replaces the embedded bundle (the Node host's `SITE_MANIFESTS_DIR`).
 */
export function defaultSiteRegistry(opts: { manifests?: readonly KubeObject[] } = {}): Registry {
  const given = opts.manifests;
  const source = given ? () => structuredClone([...given]) : undefined;
  return {
    cluster: [netComponent(source), machinaComponent(source)],
    site: [metalmanComponent(source), storageComponent()],
  };
}
