import { Resources } from "../../../kube/resources.ts";
import { SiteConditionType } from "../api.ts";
import { type ClusterComponent, failed, noSites, reconciled } from "../component.ts";
import { isRBACObject, parseManifests } from "../manifests.ts";

/** Name of net's shared config in the operator namespace; editing it re-runs every Site. */
export const netConfigName = "net-config";

/**
 * Embedded manifests of the cluster dataplane, in the build-time namespace. The metalman
 * ServiceAccount shipped in the same bundle is metalman's, not net's (see `isRBACObject`).
 */
const netManifests = `
apiVersion: v1
kind: ServiceAccount
metadata:
  name: net
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: net
    app.kubernetes.io/managed-by: unbounded-operator
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: metalman
  namespace: kubefn-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${netConfigName}
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: net
    app.kubernetes.io/managed-by: unbounded-operator
data:
  cluster-cidr: 10.244.0.0/16
  mtu: "1420"
`;

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
        await env.applyManifests(parseManifests(netManifests), (obj) => {
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
