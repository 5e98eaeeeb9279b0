import { Resources } from "../../kube/index.ts";
import { defineOperator } from "../operator.ts";
import { siteResource } from "./api.ts";
import { defaultSiteRegistry } from "./components/index.ts";
import { siteController, siteControllerName } from "./controller.ts";
import { defaultSiteConfig, siteSettings } from "./settings.ts";

/** The Site operator (seed 004): a registry of cluster-wide and per-Site components. */
export const siteOperator = defineOperator({
  name: siteControllerName,
  kinds: [siteResource, Resources.ConfigMap, Resources.Deployment],
  readinessFrom: [Resources.Deployment],
  crds: { module: "shared/controllers/site/crd.ts", exports: ["siteCrd"] },
  settings: siteSettings,
  metricFamilies: {
    kubefn_site_invalid_total: {
      type: "counter",
      help: "Sites found failing the schema, by Site.",
      objectLabels: ["site"],
    },
  },
  allowLists: {
    names: ["kubefn-site-images"],
    // The components' images of SITE_IMAGE_REGISTRY and SITE_IMAGE_TAG.
    entries: ({ config: { imageRegistry, imageTag } }) =>
      ["machina", "metalman"].map((component) => ({
        list: "kubefn-site-images",
        key: `host-${component}`,
        value: `${imageRegistry}/${component}:${imageTag}`,
      })),
  },
  manifestDirectories: [
    {
      variable: "SITE_MANIFESTS_DIR",
      option: "siteManifests",
      meaning: "Site component manifests read from this directory at start (a Worker has no filesystem)",
    },
  ],
  build(settings, opts) {
    return {
      controller: () =>
        siteController({
          registry: defaultSiteRegistry(opts.siteManifests ? { manifests: opts.siteManifests } : {}),
          env: settings
            ? { config: settings.config, namespace: settings.namespace }
            : { config: defaultSiteConfig },
        }),
    };
  },
  cluster: {
    admissionPolicies: ["kubefn-system-runs-site-components"],
    roles: [
      {
        kind: "ClusterRole",
        name: "kubefn-site",
        comment: `Site operator (seed 004): Sites are cluster-scoped; their components live in the operator
namespace only, so those grants are a Role there.`,
        rules: [
          { apiGroups: ["unbounded-cloud.io"], resources: ["sites"], verbs: ["get", "list"] },
          { apiGroups: ["unbounded-cloud.io"], resources: ["sites/status"], verbs: ["patch"] },
        ],
        bound: true,
      },
      {
        kind: "Role",
        name: "kubefn-site",
        namespace: "kubefn-system",
        comment: `Components are server-side applied (read first, then an apply patch) and removed with a
UID-guarded delete.`,
        rules: [
          {
            comment: `A server-side apply that creates the object needs create as well as patch. list: the sweep's
Site drift lists (ConfigMaps, and Deployments with the Site label, once per drift period).`,
            apiGroups: [""],
            resources: ["configmaps"],
            verbs: ["get", "list", "create", "patch", "delete"],
          },
          {
            apiGroups: [""],
            resources: ["serviceaccounts"],
            verbs: ["get", "create", "patch", "delete"],
          },
          {
            apiGroups: ["apps"],
            resources: ["deployments"],
            verbs: ["get", "list", "create", "patch", "delete"],
          },
        ],
        bound: true,
      },
    ],
    audit: [
      {
        comment: `Site components' workloads in the operator namespace, whose ownerReferences the intake follows
back to their Site: the request and the stored object, there only. Nowhere else is a
Deployment's or StatefulSet's body (env, args: often credentials) sent off the API server. Their
status writes (a rollout becoming available, or losing it) bring a pass of their Site
(readinessFrom); the stored object is the same body as above.`,
        level: "RequestResponse",
        namespaces: ["kubefn-system"],
        resources: [{ group: "apps", resources: ["deployments", "deployments/status"] }],
      },
    ],
  },
});
