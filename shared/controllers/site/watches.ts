/**
 * Watch helpers for components: key matchers and mappers from a changed object to Site requests.
 * They are pure (the one exception lists Sites through the pass's own Kube) and double as
 * predicates: a mapper that returns `[]` filters the change out.
 */

import type { ObjectKey } from "../../kube/index.ts";
import { isNotFound, listAll } from "../../kube/index.ts";
import type { Watch } from "../../runtime/index.ts";
import { generationChanged, payloadChanged, type Request, requestKey } from "../../runtime/index.ts";
import { singletonRequestName, siteResource } from "./api.ts";

/** A watch mapper, as `Watch.map` takes it. */
export type WatchMap = Watch["map"];

/** A predicate on a changed object's key. */
export type KeyMatch = (key: ObjectKey) => boolean;

/** Operator-level settings every component reads. */
export interface ComponentConfig {
  imageRegistry: string;
  imageTag: string;
  /** API server endpoint advertised to per-Site agents (metalman) and cluster config. */
  apiServerEndpoint: string;
}

/** What a Site controller is configured with, before any pass (no Kube yet). */
export interface EnvSettings {
  /** The operator namespace components install into (kubefn-system by default). */
  namespace: string;
  config: ComponentConfig;
  /** Server-side apply field manager; "unbounded-operator". */
  fieldOwner: string;
  /** Name of the controller the requests are for ("site"). */
  controller: string;
}

/**
 * The part of {@link Env} available when the controller is wired: settings and watch helpers.
 *
 * @example
 * watches: (env) => [{ resource: Resources.ConfigMap, map: env.requestSiteFromConfigName("metalman-config-") }]
 */
export interface WatchEnv extends EnvSettings {
  /** Objects in the operator namespace named one of `names`. */
  inNamespaceNamed(...names: string[]): KeyMatch;
  /** Objects in the operator namespace named `prefix` + a non-empty suffix (a per-Site config). */
  inNamespaceWithPrefix(prefix: string): KeyMatch;
  /**
   * A ConfigMap `<prefix><site>` in the operator namespace → that Site. Other namespaces, other
   * names and an empty suffix map to nothing.
   */
  requestSiteFromConfigName(prefix: string): WatchMap;
  /** Any change → the singleton request `__singletons` (the Site-less pass of cluster components). */
  requestSingleton(): WatchMap;
  /**
   * Any change → the singleton request plus every Site, so a shared config re-runs cluster state
   * and refreshes each Site's conditions. Lists Sites through the mapper's Kube.
   */
  requestSingletonAndAllSites(): WatchMap;
  /**
   * Any change → every Site (no singleton): a shared workload's readiness is on every Site's
   * condition, and there is nothing to apply. Lists Sites through the mapper's Kube.
   */
  requestAllSites(): WatchMap;
  /** `map`, for changes whose key passes `match`; nothing otherwise. */
  mapWhen(match: KeyMatch, map: WatchMap): WatchMap;
  /**
   * The seed's `ManagedConfigPredicate`: `map` for ConfigMaps whose key passes `match`, on create,
   * delete, and writes that may change the payload (`payloadChanged`) — not on label- or
   * annotation-only churn.
   */
  managedConfig(match: KeyMatch, map: WatchMap): WatchMap;
  /**
   * The seed's `ManagedWorkloadPredicate`: `map` for workloads whose key passes `match`, on
   * create, delete and generation changes (`generationChanged`) — not on status churn.
   */
  managedWorkload(match: KeyMatch, map: WatchMap): WatchMap;
}

/** The Site name a per-Site config `<prefix><site>` is for; undefined without prefix or suffix. */
export function siteFromConfigName(prefix: string, name: string): string | undefined {
  if (prefix === "" || !name.startsWith(prefix) || name.length === prefix.length) return undefined;
  return name.slice(prefix.length);
}

export function createWatchEnv(settings: EnvSettings): WatchEnv {
  const { namespace, controller } = settings;
  const singleton: Request = { controller, name: singletonRequestName };
  const allSites = async (ctx: Parameters<WatchMap>[0]): Promise<Request[]> => {
    try {
      const sites = await listAll(ctx.kube, siteResource);
      return sites.flatMap((s) => (s.metadata.name ? [{ controller, name: s.metadata.name }] : []));
    } catch (err) {
      // Before the Site CRD is installed there are no Sites to refresh.
      if (isNotFound(err)) return [];
      throw err;
    }
  };
  const inNamespaceNamed =
    (...names: string[]): KeyMatch =>
    (key) =>
      key.namespace === namespace && names.includes(key.name);
  const inNamespaceWithPrefix =
    (prefix: string): KeyMatch =>
    (key) =>
      key.namespace === namespace && siteFromConfigName(prefix, key.name) !== undefined;
  return {
    ...settings,
    inNamespaceNamed,
    inNamespaceWithPrefix,
    requestSiteFromConfigName: (prefix) => (_ctx, change) => {
      if (change.key.namespace !== namespace) return [];
      const site = siteFromConfigName(prefix, change.key.name);
      return site === undefined ? [] : [{ controller, name: site }];
    },
    requestSingleton: () => () => [{ ...singleton }],
    requestSingletonAndAllSites: () => async (ctx) => [{ ...singleton }, ...(await allSites(ctx))],
    requestAllSites: () => allSites,
    mapWhen: (match, map) => (ctx, change) => (match(change.key) ? map(ctx, change) : []),
    managedConfig: (match, map) => (ctx, change) =>
      match(change.key) && payloadChanged(change) ? map(ctx, change) : [],
    managedWorkload: (match, map) => (ctx, change) =>
      match(change.key) && generationChanged(change) ? map(ctx, change) : [],
  };
}

/**
 * One watch per kind: components may watch the same kind (net and metalman both watch
 * ConfigMaps), the runtime registry accepts one watch per kind per controller. The merged mapper
 * runs each component's mapper and deduplicates the requests by key.
 */
export function mergeWatches(watches: readonly Watch[]): Watch[] {
  const byKind = new Map<string, Watch[]>();
  for (const watch of watches) {
    const key = `${watch.resource.group}/${watch.resource.resource}`;
    const list = byKind.get(key);
    if (list) list.push(watch);
    else byKind.set(key, [watch]);
  }
  return [...byKind.values()].map((group) => {
    const [first] = group as [Watch, ...Watch[]];
    if (group.length === 1) return first;
    return {
      resource: first.resource,
      async map(ctx, change) {
        const seen = new Set<string>();
        const out: Request[] = [];
        for (const watch of group) {
          for (const request of await watch.map(ctx, change)) {
            const key = requestKey(request);
            if (!seen.has(key)) {
              seen.add(key);
              out.push(request);
            }
          }
        }
        return out;
      },
    };
  });
}
