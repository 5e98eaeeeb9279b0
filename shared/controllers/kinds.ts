import { type Resource, Resources } from "../kube/index.ts";
import { proxyResource } from "./proxy/index.ts";
import { siteResource } from "./site/index.ts";
import { subPoolOwnedResources, subPoolResource } from "./subpool/index.ts";

/**
 * Every kind the operators read — each controller's primary (`for`), the kinds it owns and the
 * kinds it watches — as a static list, like {@link controllerCrds}: the relay list-watches these
 * without building the operators. A drift test (infra/relay/kinds.test.ts) holds it equal to what
 * the registry of `createOperators` declares; adding a kind to a controller means adding it here.
 */
export const controllerKinds: readonly { controller: string; kinds: readonly Resource[] }[] = [
  { controller: "proxy", kinds: [proxyResource, Resources.Secret] },
  {
    controller: "subpool",
    kinds: [subPoolResource, ...subPoolOwnedResources],
  },
  { controller: "site", kinds: [siteResource, Resources.ConfigMap, Resources.Deployment] },
];
