import type { Registry } from "../component.ts";
import { metalmanComponent } from "./metalman.ts";
import { netComponent } from "./net.ts";
import { storageComponent } from "./storage.ts";

/**
 * The sample registry: net (cluster), then metalman and storage (per Site). Conditions appear on
 * every Site in this order: NetReady, MetalmanReady, StorageReady.
 */
export function defaultSiteRegistry(): Registry {
  return { cluster: [netComponent()], site: [metalmanComponent(), storageComponent()] };
}
