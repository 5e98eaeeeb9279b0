import { Resources } from "../../../kube/index.ts";
import { SiteConditionType } from "../api.ts";
import { type ClusterComponent, failed, noSites, reconciled } from "../component.ts";
import { isRBACObject } from "../manifests.ts";
import { netManifests } from "./net.manifests.ts";

/** Name of net's shared config in the operator namespace; editing it re-runs every Site. */
export const netConfigName = "net-config";

/**
 * net: the cluster dataplane, one per cluster. Applies its ServiceAccount and `net-config` (with
 * the live Site names and the API server endpoint) into the operator namespace; drift is
 * re-applied because `net-config` changes re-run the singleton and every Site.
 *
 * Caveats: with no Sites it applies nothing and deletes nothing (`NoSites`): removing the
 * dataplane because the last Site went would break pod networking cluster-wide.
 */
export function netComponent(): ClusterComponent {
  return {
    name: "net",
    conditionType: SiteConditionType.NetReady,
    watches: (env) => [
      {
        resource: Resources.ConfigMap,
        map: env.mapWhen(env.inNamespaceNamed(netConfigName), env.requestSingletonAndAllSites()),
      },
    ],
    async reconcile(env, sites) {
      if (sites.length === 0) return noSites("no sites; net retained");
      const siteNames = sites.map((s) => s.metadata.name ?? "").join(",");
      try {
        await env.applyManifests(structuredClone([...netManifests]), (obj) => {
          if (isRBACObject(obj, "metalman")) return null;
          if (obj.kind === "ConfigMap" && obj.metadata.name === netConfigName) {
            obj.data = {
              ...(obj.data as Record<string, string>),
              sites: siteNames,
              "apiserver-endpoint": env.config.apiServerEndpoint,
            };
          }
          return obj;
        });
      } catch (err) {
        return failed(err);
      }
      return reconciled();
    },
  };
}
