export { availabilityResult, deploymentAvailability } from "./availability.ts";
export { machinaConfigName, machinaName, operatorManifests } from "./bundle.ts";
export { defaultSiteRegistry } from "./default-registry.ts";
export { machinaComponent, machinaConfigFor } from "./machina.ts";
export {
  metalmanComponent,
  metalmanConfigFor,
  metalmanConfigHashAnnotation,
  metalmanDeploymentFor,
  metalmanOverridePrefix,
} from "./metalman.ts";
export { netComponent, netConfigName } from "./net.ts";
export { storageComponent, storageConfigFor } from "./storage.ts";
