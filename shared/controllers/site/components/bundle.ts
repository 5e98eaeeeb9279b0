import type { KubeObject } from "../../../kube/index.ts";
import { machinaManifests } from "./machina.manifests.ts";
import { netManifests } from "./net.manifests.ts";

/** Name of net's shared config in the operator namespace; editing it re-runs every Site. */
export const netConfigName = "net-config";
/** Name of machina's config in the operator namespace; editing it re-runs the cluster components. */
export const machinaConfigName = "machina-config";
/** Name of machina's Deployment (and ServiceAccount) in the operator namespace. */
export const machinaName = "machina";

/**
 * Where components take their manifests from: the embedded bundle by default, or (Node host,
 * `SITE_MANIFESTS_DIR`) a directory read once at start. Returns fresh copies each call.
 */
export type ManifestSource = () => KubeObject[];

/**
 * The operator's embedded manifests (net.yaml, machina.yaml; parsed at build time by
 * `npm run gen:manifests`), in the build-time namespace `kubefn-system` (components retarget it
 * to the operator's). One bundle for every component, as the seed embeds them: each component
 * takes its own objects out of it (RBAC by `isRBACObject`, configs by `Env.defaultConfigMap`), so
 * the component that skips another's RBAC and the one that applies it read the same list. A CRD
 * in it is never applied by a component (see `crdKind`). Returns a fresh deep copy.
 */
export function operatorManifests(): KubeObject[] {
  return structuredClone([...netManifests, ...machinaManifests]);
}
