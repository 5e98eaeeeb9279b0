/**
 * The execution context handed to every component in one pass: the pass's Kube, the operator
 * namespace and config, and the apply/delete machinery with the operator's field owner.
 */

import type { Kube, KubeObject, Resource } from "../../kube/index.ts";
import { covers, isNotFound, keyOf, listAll, Resources, serverSideApply } from "../../kube/index.ts";
import { groupOf } from "../../runtime/index.ts";
import * as z from "../../zod/index.ts";
import { parseSite, type Site, siteResource } from "./api.ts";
import { crdKind, defaultConfigMap, retargetNamespaceOf } from "./manifests.ts";
import { type ComponentConfig, createWatchEnv, type EnvSettings, type WatchEnv } from "./watches.ts";

/**
 * What `applyObject` did (`unchanged` when the live object already held every applied field) and
 * the object as the server holds it after (status included: the read, or the apply's answer).
 */
export interface ApplyResult {
  readonly result: "applied" | "unchanged";
  readonly object: KubeObject;
}

/**
 * Rewrites an embedded object before it is applied; return null to skip it.
 * Receives a private copy, already retargeted to the operator namespace.
 */
export type ManifestMutator = (obj: KubeObject) => KubeObject | null;

/** Settings plus the pass's Kube and the write helpers every component uses. */
export interface Env extends WatchEnv {
  kube: Kube;
  /**
   * Server-side applies each object (CRDs skipped; see `applyObject`), after retargeting its
   * namespace and running `mutate`. Stops at the first failure.
   */
  applyManifests(objects: readonly KubeObject[], mutate?: ManifestMutator): Promise<ApplyResult[]>;
  /**
   * Server-side applies one object as the field owner, with force. Reads it first and skips the
   * apply when this field owner already applied it and the live object holds every field of `obj`
   * at the same value — an apply is a PATCH even when it changes nothing, and steady state writes
   * nothing.
   *
   * Caveats: a field dropped from `obj` since the last apply is pruned only at the next apply that
   * happens for another reason (see `covers`).
   */
  applyObject(obj: KubeObject): Promise<ApplyResult>;
  /**
   * Deletes the object named by `obj`'s apiVersion/kind/namespace/name if it exists (read first, so
   * an absent object costs no write); absent is fine.
   */
  deleteIfExists(obj: Pick<KubeObject, "apiVersion" | "kind" | "metadata">): Promise<boolean>;
  /** Rewrites the build-time namespace of an embedded object to the operator namespace, in place. */
  retargetNamespace(obj: KubeObject): void;
  /**
   * The ConfigMap `name` from `manifests`, retargeted to the operator namespace (the seed's
   * `DefaultConfigMap`); `component` names the manifest set in the error when it is missing.
   */
  defaultConfigMap(
    manifests: readonly KubeObject[],
    name: string,
    component: string,
  ): KubeObject & { data: Record<string, string> };
  /** Every Site that parses, by name; the others are reported to `onInvalidSite`, never dropped silently. */
  listSites(): Promise<Site[]>;
  /** `<imageRegistry>/<repository>:<imageTag>`. */
  image(repository: string): string;
}

/** What computing a component's desired objects needs: settings only, no API access. */
export type DesiredEnv = Pick<Env, "namespace" | "config" | "image">;

/** The {@link DesiredEnv} of these settings (the drift decision has no pass and no Kube). */
export function desiredEnv(settings: EnvSettings): DesiredEnv {
  return { namespace: settings.namespace, config: settings.config, image: imageOf(settings) };
}

const imageOf =
  (settings: EnvSettings) =>
  (repository: string): string =>
    `${settings.config.imageRegistry}/${repository}:${settings.config.imageTag}`;

const knownKinds: ReadonlyMap<string, Resource> = new Map(
  Object.values(Resources).map((res) => [`${res.group}/${res.kind}`, res]),
);

/** The Resource of an object from its apiVersion and kind, among the kinds components apply. */
export function resourceOfObject(obj: Pick<KubeObject, "apiVersion" | "kind">): Resource {
  const res = knownKinds.get(`${groupOf(obj.apiVersion)}/${obj.kind}`);
  if (!res) throw new TypeError(`Site components cannot apply ${obj.apiVersion} ${obj.kind}`);
  return res;
}

function appliedBy(live: KubeObject, fieldOwner: string): boolean {
  return (live.metadata.managedFields ?? []).some((entry) => {
    const e = entry as { manager?: string; operation?: string };
    return e.manager === fieldOwner && e.operation === "Apply";
  });
}

/** Default settings: the operator namespace and the seed's field owner. */
export const defaultEnvSettings = {
  namespace: "kubefn-system",
  fieldOwner: "unbounded-operator",
  controller: "site",
} as const;

/** A Site `listSites` left out because it fails the schema, with the schema's message. */
export type InvalidSiteReport = (name: string, message: string) => void;

/**
 * Builds the Env of one pass around that pass's Kube. `onInvalidSite` hears of every Site that
 * `listSites` leaves out because it fails the schema (the controller logs and counts it).
 */
export function createEnv(kube: Kube, settings: EnvSettings, onInvalidSite?: InvalidSiteReport): Env {
  const watchEnv = createWatchEnv(settings);
  const applyObject = async (obj: KubeObject): Promise<ApplyResult> => {
    const res = resourceOfObject(obj);
    try {
      const live = await kube.get(res, keyOf(obj));
      if (appliedBy(live, settings.fieldOwner) && covers(live, obj))
        return { result: "unchanged", object: live };
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return { result: "applied", object: await serverSideApply(kube, res, obj, settings.fieldOwner, true) };
  };

  const retargetNamespace = (obj: KubeObject) => retargetNamespaceOf(obj, settings.namespace);

  return {
    ...watchEnv,
    kube,
    applyObject,
    retargetNamespace,
    defaultConfigMap: (manifests, name, component) =>
      defaultConfigMap(manifests, name, component, settings.namespace),
    async applyManifests(objects, mutate) {
      const results: ApplyResult[] = [];
      for (const original of objects) {
        if (original.kind === crdKind) continue;
        const copy = structuredClone(original);
        retargetNamespace(copy);
        const obj = mutate ? mutate(copy) : copy;
        if (obj === null) continue;
        results.push(await applyObject(obj));
      }
      return results;
    },
    async deleteIfExists(obj) {
      const res = resourceOfObject(obj);
      try {
        // Read first: a DELETE of an absent object is still a write request, and a disabled
        // component's steady state should write nothing.
        const live = await kube.get(res, keyOf(obj));
        await kube.delete(
          res,
          keyOf(obj),
          live.metadata.uid ? { preconditions: { uid: live.metadata.uid } } : {},
        );
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
    async listSites() {
      const items = await listAll(kube, siteResource);
      return items
        .flatMap((item) => {
          const parsed = parseSite(item);
          if (!parsed.success) onInvalidSite?.(item.metadata.name ?? "", z.prettifyError(parsed.error));
          return parsed.success ? [parsed.data] : [];
        })
        .sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
    },
    image: imageOf(settings),
  };
}

export type { ComponentConfig, EnvSettings, WatchEnv };
