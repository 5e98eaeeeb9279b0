/**
 * Site drift from the sweep's lists: the operator namespace's ConfigMaps and the per-Site
 * Deployments listed once per drift period, and a pure comparison per Site with what its
 * components would apply.
 */
import type { Condition, KubeObject, Resource } from "../../kube/index.ts";
import { covers, Resources } from "../../kube/index.ts";
import { type DriftDeclaration, defineDrift, type Listed, readinessDiffers } from "../../runtime/index.ts";
import { parseSite } from "./api.ts";
import type { ListedRead, Registry } from "./component.ts";
import { deploymentAvailability } from "./components/index.ts";
import { type DesiredEnv, desiredEnv } from "./env.ts";
import { siteReadiness } from "./readiness.ts";
import type { EnvSettings } from "./watches.ts";

/** The lists by kind: every ConfigMap of the operator namespace (per-Site configs and their overrides), the per-Site Deployments. */
const listOf: Record<string, string> = { ConfigMap: "configmaps", Deployment: "deployments" };

/**
 * The Site drift declaration: two lists in the operator namespace per drift period (ConfigMaps;
 * Deployments — the per-Site ones and the cluster components'), and {@link siteDriftReason} per Site.
 *
 * Caveats: what cluster components apply (net, machina: cluster-wide, shared by every Site) is not
 * compared; their watched configs re-run every Site on change, and the safety net covers the rest.
 */
export function siteDrift(registry: Registry, settings: EnvSettings): DriftDeclaration {
  const env = desiredEnv(settings);
  return defineDrift<undefined>({
    lists: [
      { name: listOf.ConfigMap!, resource: Resources.ConfigMap, namespace: settings.namespace },
      {
        name: listOf.Deployment!,
        resource: Resources.Deployment,
        namespace: settings.namespace,
      },
    ],
    decide: ({ primary, listed }) => siteDriftReason(primary, listed, registry, env),
  });
}

/**
 * Why this Site needs a pass, or undefined when its pass would change nothing: deletion; a
 * component condition missing, not True, or observed at an older generation; a per-Site object a
 * component applies (its `desired`) missing (`missing:<Kind>`) or holding other values
 * (`changed:<Kind>`, the test `applyObject` makes), or still there while the component is disabled
 * (`disabled:<Kind>`); a component's Deployment (its `workload`) listed but no longer available
 * under a True condition (`unavailable:<Type>`).
 *
 * Caveats: a Site the schema rejects is quiet once its conditions say so at this generation (its
 * pass cannot fix it; the edit that fixes it is an event). A condition that stays False (a
 * component that keeps failing) sends one pass per drift period, as the resync did.
 */
export async function siteDriftReason(
  primary: KubeObject,
  listed: Listed,
  registry: Registry,
  env: DesiredEnv,
): Promise<string | undefined> {
  if (primary.metadata.deletionTimestamp) return "deleting";
  const generation = primary.metadata.generation;
  const conditions = ((primary.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).filter(
    (c) => typeof c?.type === "string",
  );
  const byType = new Map(conditions.map((c) => [c.type, c]));
  const types = [...registry.cluster, ...registry.site].map((c) => c.conditionType);
  for (const type of types) {
    const c = byType.get(type);
    if (!c) return `status:${type}`;
    if (c.observedGeneration !== undefined && c.observedGeneration !== generation) return "generation";
  }
  const parsed = parseSite(primary);
  if (!parsed.success) return undefined;
  for (const type of types) {
    if (byType.get(type)?.status !== "True") return `status:${type}`;
  }
  if (readinessDiffers(primary, siteReadiness(types)(primary))) return "summary";

  const site = parsed.data;
  const read: ListedRead = (resource: Resource, key) => {
    const list = listOf[resource.kind];
    return list ? listed.get(list, key) : undefined;
  };
  for (const component of registry.site) {
    if (!component.desired) continue;
    const enabled = component.enabled(site);
    for (const object of await component.desired(env, site, read)) {
      const list = listOf[object.kind];
      if (!list || !listed.available(list)) continue;
      const live = listed.get(list, {
        namespace: object.metadata.namespace ?? env.namespace,
        name: object.metadata.name ?? "",
      });
      if (!enabled) {
        if (live) return `disabled:${object.kind}`;
        continue;
      }
      if (!live) return `missing:${object.kind}`;
      if (!covers(live, object)) return `changed:${object.kind}`;
    }
  }
  // Last: a spec change of the Deployment (above) is the more telling reason for the same pass.
  if (listed.available(listOf.Deployment!)) {
    for (const component of [...registry.cluster, ...registry.site]) {
      if (!component.workload) continue;
      if ("enabled" in component && !component.enabled(site)) continue;
      const live = listed.get(listOf.Deployment!, component.workload(env, site));
      if (live && deploymentAvailability(live).state !== "available")
        return `unavailable:${component.conditionType}`;
    }
  }
  return undefined;
}
