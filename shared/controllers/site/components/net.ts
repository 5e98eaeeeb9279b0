import { Resources } from "../../../kube/index.ts";
import { SiteConditionType } from "../api.ts";
import { type ClusterComponent, failed, noSites, reconciled } from "../component.ts";
import { isRBACObject } from "../manifests.ts";
import { type ManifestSource, netConfigName, operatorManifests } from "./bundle.ts";

export { netConfigName };

/**
 * net: the cluster dataplane, one per cluster. Applies, from the operator's manifest bundle (CRDs
 * skipped), its ServiceAccount and `net-config` (with the live Site names and the API server
 * endpoint) into the operator namespace; drift is
 * re-applied because `net-config` changes re-run the singleton and every Site.
 *
 * Caveats: with no Sites it applies nothing and deletes nothing (`NoSites`): removing the
 * dataplane because the last Site went would break pod networking cluster-wide.
 */
export function netComponent(manifests: ManifestSource = operatorManifests): ClusterComponent {
  return {
    name: "net",
    conditionType: SiteConditionType.NetReady,
    watches: (env) => [
      {
        resource: Resources.ConfigMap,
        map: env.managedConfig(env.inNamespaceNamed(netConfigName), env.requestSingletonAndAllSites()),
      },
    ],
    async reconcile(env, sites) {
      if (sites.length === 0) return noSites("no sites; net retained");
      const siteNames = sites.map((s) => s.metadata.name ?? "").join(",");
      try {
        await env.applyManifests(manifests(), (obj) => {
          // The bundle is shared: metalman's RBAC is metalman's (the one decision, isRBACObject),
          // and of the rest net applies only what is labelled as net's.
          if (isRBACObject(obj, "metalman")) return null;
          if (obj.metadata.labels?.["app.kubernetes.io/name"] !== "net") return null;
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
