import type { Registry } from "../component.ts";
import { machinaComponent } from "./machina.ts";
import { metalmanComponent } from "./metalman.ts";
import { netComponent } from "./net.ts";
import { storageComponent } from "./storage.ts";

/**
 * The sample registry: net and machina (cluster), then metalman and storage (per Site).
 * Conditions appear on every Site in this order: NetReady, MachinaReady, MetalmanReady,
 * StorageReady.
 */
export function defaultSiteRegistry(): Registry {
  return { cluster: [netComponent(), machinaComponent()], site: [metalmanComponent(), storageComponent()] };
}
