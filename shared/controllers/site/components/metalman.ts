import type { KubeObject } from "../../../kube/index.ts";
import { isNotFound, Resources } from "../../../kube/index.ts";
import { type Site, SiteConditionType, siteComponentEnabled, siteLabelKey } from "../api.ts";
import { failed, type SiteComponent } from "../component.ts";
import type { DesiredEnv, Env } from "../env.ts";
import {
  configMapPayloadHash,
  isRBACObject,
  setPodSpecImages,
  siteNodeAffinity,
  siteOwnerReference,
} from "../manifests.ts";
import { siteFromConfigName } from "../watches.ts";
import { availabilityResult } from "./availability.ts";
import { type ManifestSource, operatorManifests } from "./bundle.ts";

/** Prefix of the optional per-Site override ConfigMap, `metalman-config-<site>`. */
export const metalmanOverridePrefix = "metalman-config-";
/** Pod template annotation carrying the config hash, so a config change rolls the Deployment. */
export const metalmanConfigHashAnnotation = "unbounded-cloud.io/config-hash";

const metalmanName = (site: Site) => `metalman-${site.metadata.name ?? ""}`;
const overrideName = (site: Site) => `${metalmanOverridePrefix}${site.metadata.name ?? ""}`;

/** The generated config `metalman-<site>`: defaults, the API server, then the Site's overrides. */
export function metalmanConfigFor(
  env: DesiredEnv,
  site: Site,
  overrides: Record<string, string>,
): KubeObject {
  const name = site.metadata.name ?? "";
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: metalmanName(site),
      namespace: env.namespace,
      labels: { "app.kubernetes.io/name": "metalman", [siteLabelKey]: name },
      ownerReferences: [siteOwnerReference(site)],
    },
    data: {
      "dhcp-enabled": "true",
      "pxe-boot": "ipxe",
      ...overrides,
      site: name,
      "apiserver-endpoint": env.config.apiServerEndpoint,
    },
  };
}

/** The per-Site metalman Deployment: pinned to the Site's nodes, owned by the Site. */
export function metalmanDeploymentFor(env: DesiredEnv, site: Site, configHash: string): KubeObject {
  const name = site.metadata.name ?? "";
  const labels = { "app.kubernetes.io/name": "metalman", [siteLabelKey]: name };
  const deployment: KubeObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: metalmanName(site),
      namespace: env.namespace,
      labels,
      ownerReferences: [siteOwnerReference(site)],
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { [metalmanConfigHashAnnotation]: configHash.slice(0, 16) } },
        spec: {
          serviceAccountName: "metalman",
          affinity: siteNodeAffinity(name),
          containers: [
            {
              name: "metalman",
              image: "placeholder",
              args: ["--config=/etc/metalman/config", `--site=${name}`],
              volumeMounts: [{ name: "config", mountPath: "/etc/metalman" }],
            },
          ],
          volumes: [{ name: "config", configMap: { name: metalmanName(site) } }],
        },
      },
    },
  };
  setPodSpecImages(deployment, env.image("metalman"));
  return deployment;
}

/**
 * metalman: per-Site bare-metal provisioning — a ConfigMap `metalman-<site>` and a Deployment of
 * the same name with node affinity for the Site's labels, both controlled by the Site (the garbage
 * collector removes them with it), running as the `metalman` ServiceAccount it applies from the
 * operator's bundle (without it the Deployment's Pods would be refused). An optional `metalman-config-<site>` ConfigMap in the operator
 * namespace overrides config keys; it is watched, so editing it re-runs that Site. MetalmanReady
 * reports the Deployment's availability (`availabilityResult`): True once it runs.
 */
export function metalmanComponent(manifests: ManifestSource = operatorManifests): SiteComponent {
  return {
    name: "metalman",
    conditionType: SiteConditionType.MetalmanReady,
    enabled: (site) => siteComponentEnabled(site, "metalman"),
    watches: (env) => [
      {
        resource: Resources.ConfigMap,
        map: env.managedConfig(
          env.inNamespaceWithPrefix(metalmanOverridePrefix),
          env.requestSiteFromConfigName(metalmanOverridePrefix),
        ),
      },
    ],
    workload: (env, site) => ({ namespace: env.namespace, name: metalmanName(site) }),
    async reconcile(env, site) {
      try {
        // The ServiceAccount the Deployment runs as, from the shared bundle (net skips it). Shared
        // by every Site's metalman, so it carries no Site owner and stays when one Site goes.
        await env.applyManifests(manifests(), (obj) => (isRBACObject(obj, "metalman") ? obj : null));
        const overrides = await readOverrides(env, site);
        const config = metalmanConfigFor(env, site, overrides);
        await env.applyObject(config);
        const hash = await configMapPayloadHash(config as KubeObject & { data: Record<string, string> });
        const { object } = await env.applyObject(metalmanDeploymentFor(env, site, hash));
        return availabilityResult(object);
      } catch (err) {
        return failed(err);
      }
    },
    siteFromKey: (resource, key, namespace) =>
      (resource.kind === "ConfigMap" || resource.kind === "Deployment") &&
      key.namespace === namespace &&
      !key.name.startsWith(metalmanOverridePrefix)
        ? siteFromConfigName("metalman-", key.name)
        : undefined,
    async desired(env, site, read) {
      const override = read(Resources.ConfigMap, { namespace: env.namespace, name: overrideName(site) });
      const config = metalmanConfigFor(
        env,
        site,
        (override?.data as Record<string, string> | undefined) ?? {},
      );
      const hash = await configMapPayloadHash(config as KubeObject & { data: Record<string, string> });
      return [config, metalmanDeploymentFor(env, site, hash)];
    },
    async cleanup(env, site) {
      await env.deleteIfExists({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: metalmanName(site), namespace: env.namespace },
      });
      await env.deleteIfExists({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: metalmanName(site), namespace: env.namespace },
      });
    },
  };
}

async function readOverrides(env: Env, site: Site): Promise<Record<string, string>> {
  try {
    const cm = await env.kube.get(Resources.ConfigMap, {
      namespace: env.namespace,
      name: overrideName(site),
    });
    return (cm.data as Record<string, string> | undefined) ?? {};
  } catch (err) {
    if (isNotFound(err)) return {};
    throw err;
  }
}
