/**
 * The installer library: what a release's `install.yaml` holds and what `kubefn install`,
 * `kubefn uninstall` and the release build apply or publish — the objects of infra/'s kustomization,
 * the in-cluster host and the relay, with kubefn's images pinned. Node-only (it reads infra/);
 * cli/ and scripts/ both use it, neither imports the other.
 */

export { operatorCrds } from "./crds.ts";
export {
  crdsOf,
  hostObjects,
  type InstallProfile,
  inClusterIntakeUrl,
  installObjects,
  isImageField,
  kubefnImageRepository,
  kustomizeObjects,
  type Manifest,
  objectKey,
  pinImages,
  profileObjects,
  relayObjects,
  repositoryRoot,
  toYamlStream,
} from "./manifest.ts";
