import type { KubeObject } from "../../../kube/index.ts";
import { Resources } from "../../../kube/index.ts";
import { SiteConditionType } from "../api.ts";
import { type ClusterComponent, failed, noSites } from "../component.ts";
import type { Env } from "../env.ts";
import { configMapPayloadHash, isRBACObject, setPodSpecImages } from "../manifests.ts";
import { availabilityResult } from "./availability.ts";
import { type ManifestSource, machinaConfigName, machinaName, operatorManifests } from "./bundle.ts";
import { metalmanConfigHashAnnotation } from "./metalman.ts";

export { machinaConfigName, machinaName };

/**
 * machina's config: the bundle's `machina-config` defaults (the seed's `DefaultConfigMap`), the
 * live Site names and the API server endpoint (the seed: "APIServerEndpoint is injected into the
 * machina controller config"). Pure.
 */
export function machinaConfigFor(
  env: Env,
  manifests: readonly KubeObject[],
  siteNames: string[],
): KubeObject {
  const config = env.defaultConfigMap(manifests, machinaConfigName, "machina");
  config.data = {
    ...config.data,
    sites: siteNames.join(","),
    "apiserver-endpoint": env.config.apiServerEndpoint,
  };
  return config;
}

/**
 * machina: the cluster-wide machine controller, one per cluster — its ServiceAccount, the
 * `machina-config` ConfigMap and the `machina` Deployment (image `<registry>/machina:<tag>`, a
 * config-hash annotation so a config change rolls it) in the operator namespace, from the
 * operator's bundle (CRDs skipped). Publishes MachinaReady.
 *
 * Watches its config (payload changes only: the singleton and every Site run again) and its
 * Deployment (generation changes only: the singleton runs again and re-applies it), so drift and
 * deletion heal without re-applying on every status update. MachinaReady reports the
 * Deployment's availability, not its apply (`availabilityResult`): True once it runs, brought by
 * the Deployment's status writes to every Site (`readinessWatches`).
 *
 * Caveats: like net, with no Sites it is retained (`NoSites`), never deleted.
 */
export function machinaComponent(source: ManifestSource = operatorManifests): ClusterComponent {
  return {
    name: "machina",
    conditionType: SiteConditionType.MachinaReady,
    watches: (env) => [
      {
        resource: Resources.ConfigMap,
        map: env.managedConfig(env.inNamespaceNamed(machinaConfigName), env.requestSingletonAndAllSites()),
      },
      {
        resource: Resources.Deployment,
        map: env.managedWorkload(env.inNamespaceNamed(machinaName), env.requestSingleton()),
      },
    ],
    // machina is shared by every Site (no Site's controller reference, seed 004: a cluster
    // component is never tied to one Site), so its Deployment's status writes map by its name:
    // its availability is MachinaReady on every Site.
    readinessWatches: (env) => [
      {
        resource: Resources.Deployment,
        map: env.mapWhen(env.inNamespaceNamed(machinaName), env.requestAllSites()),
      },
    ],
    workload: (env) => ({ namespace: env.namespace, name: machinaName }),
    async reconcile(env, sites) {
      if (sites.length === 0) return noSites("no sites; machina retained");
      try {
        const manifests = source();
        const config = machinaConfigFor(
          env,
          manifests,
          sites.map((s) => s.metadata.name ?? ""),
        );
        const hash = await configMapPayloadHash(config as KubeObject & { data: Record<string, string> });
        const applied = await env.applyManifests(manifests, (obj) => {
          if (isRBACObject(obj, "machina")) return obj;
          if (obj.kind === "ConfigMap" && obj.metadata.name === machinaConfigName) return config;
          if (obj.kind === "Deployment" && obj.metadata.name === machinaName) {
            setPodSpecImages(obj, env.image("machina"));
            const template = (
              obj.spec as { template: { metadata: { annotations?: Record<string, string> } } }
            ).template;
            template.metadata.annotations = { [metalmanConfigHashAnnotation]: hash.slice(0, 16) };
            return obj;
          }
          return null;
        });
        const deployment = applied.find(
          ({ object }) => object.kind === "Deployment" && object.metadata.name === machinaName,
        );
        return availabilityResult(deployment?.object);
      } catch (err) {
        return failed(err);
      }
    },
  };
}
