import type { KubeObject, Resource } from "../../kube/index.ts";
import { dnsLabel, dnsSubdomain } from "../../kube/index.ts";
import type { ControllerDefinition, Watch } from "./controller.ts";

/** A watch together with the controller that registered it. */
export interface RegisteredWatch {
  controller: ControllerDefinition;
  watch: Watch;
}

/**
 * The controllers kubefn runs, indexed for the intake and the executor. Kinds are matched by API
 * group and plural resource (or group and kind, for ownerReferences); versions are ignored, since
 * every version of a kind names the same objects.
 */
export interface Registry {
  readonly controllers: readonly ControllerDefinition[];
  /** The controller registered under `name`. */
  controller(name: string): ControllerDefinition | undefined;
  /** The controller whose `for` is this group/resource. */
  primaryFor(group: string, resource: string): ControllerDefinition | undefined;
  /** The controller whose `for` has this group and kind (resolves an ownerReference). */
  primaryForKind(group: string, kind: string): ControllerDefinition | undefined;
  /** Controllers that list this group/resource in `owns`. */
  ownersOf(group: string, resource: string): readonly ControllerDefinition[];
  /** Watches registered on this group/resource. */
  watchersOf(group: string, resource: string): readonly RegisteredWatch[];
}

/** Start-up failure of {@link createRegistry}; `problems` lists every one found. */
export class RegistryError extends Error {
  override readonly name = "RegistryError";
  constructor(readonly problems: readonly string[]) {
    super(
      `invalid controller registry (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n  - ${problems.join("\n  - ")}`,
    );
  }
}

/** Sweep granularity: a resync shorter than a minute cannot be honoured. */
export const MIN_RESYNC_SECONDS = 60;
/** Beyond a week a resync is almost certainly a unit mistake (milliseconds). */
export const MAX_RESYNC_SECONDS = 7 * 24 * 3600;

const KIND = /^[A-Z][A-Za-z0-9]*$/;

const kindKey = (group: string, name: string): string => `${group}/${name}`;

/** The API group of an `apiVersion` ("apps/v1" → "apps", "v1" → ""). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** The group/resource index key of a Resource, for maps keyed by kind. */
export function resourceKey(resource: Pick<Resource, "group" | "resource">): string {
  return kindKey(resource.group, resource.resource);
}

/** Whether `object` is an instance of `resource` (by apiVersion group and kind). */
export function isKind(object: KubeObject, resource: Resource): boolean {
  return object.kind === resource.kind && groupOf(object.apiVersion) === resource.group;
}

/**
 * Builds the registry and validates it once, at start-up: unique controller names, condition
 * types unique within each controller (every kind carries its own `Ready`), every Resource complete and well-formed, no kind claimed
 * as `for` by two controllers, a resync between 60 s and a week, every declared requeue delay
 * shorter than the resync (one as late is never sent), the error policy's latch and quota
 * conditions among the controller's own condition types, a finalizer's name domain-qualified.
 *
 * @throws RegistryError listing every problem, so one start-up shows them all.
 * @example
 * const registry = createRegistry([proxyController, subPoolController, siteController]);
 * registry.primaryFor("subrelay.example.com", "subpools")?.name // "subpool"
 */
export function createRegistry(definitions: readonly ControllerDefinition[]): Registry {
  const problems: string[] = [];
  const byName = new Map<string, ControllerDefinition>();
  const byResource = new Map<string, ControllerDefinition>();
  const byKind = new Map<string, ControllerDefinition>();
  const owners = new Map<string, ControllerDefinition[]>();
  const watchers = new Map<string, RegisteredWatch[]>();

  if (definitions.length === 0) problems.push("no controllers registered");

  definitions.forEach((def, index) => {
    const label =
      typeof def.name === "string" && def.name !== "" ? `controller "${def.name}"` : `controller #${index}`;
    if (typeof def.name !== "string" || !dnsLabel.test(def.name)) {
      problems.push(`${label}: name must be a non-empty lowercase DNS label`);
    } else if (byName.has(def.name)) {
      problems.push(`${label}: name registered twice`);
    } else {
      byName.set(def.name, def);
    }

    problems.push(...resourceProblems(`${label} for`, def.for));
    if (def.for && typeof def.for.resource === "string") {
      const key = resourceKey(def.for);
      const other = byResource.get(key);
      if (other)
        problems.push(`${label}: kind ${def.for.kind} (${key}) is already the primary of "${other.name}"`);
      else {
        byResource.set(key, def);
        byKind.set(kindKey(def.for.group, def.for.kind), def);
      }
    }

    const ownedSeen = new Set<string>();
    for (const owned of def.owns ?? []) {
      const where = `${label} owns ${owned?.kind ?? "?"}`;
      const resourceIssues = resourceProblems(where, owned);
      problems.push(...resourceIssues);
      if (resourceIssues.length > 0) continue;
      const key = resourceKey(owned);
      if (def.for && key === resourceKey(def.for))
        problems.push(`${where}: a controller cannot own its own primary kind`);
      if (ownedSeen.has(key)) problems.push(`${where}: listed twice`);
      ownedSeen.add(key);
      pushTo(owners, key, def);
    }

    const readySeen = new Set<string>();
    for (const ready of def.readinessFrom ?? []) {
      const key = ready ? resourceKey(ready) : "?";
      readySeen.add(key);
      if (!ownedSeen.has(key))
        problems.push(`${label} takes readiness from ${ready?.kind ?? "?"}: it must be listed in owns`);
    }
    const readinessWatched = new Set<string>();
    for (const watch of def.readinessWatches ?? []) {
      const where = `${label} maps readiness of ${watch?.resource?.kind ?? "?"}`;
      if (typeof watch?.map !== "function") problems.push(`${where}: map must be a function`);
      const key = watch?.resource ? resourceKey(watch.resource) : "?";
      if (!readySeen.has(key)) problems.push(`${where}: it must be listed in readinessFrom`);
      if (readinessWatched.has(key)) problems.push(`${where}: listed twice (merge the mappers)`);
      readinessWatched.add(key);
    }

    const watchedSeen = new Set<string>();
    for (const watch of def.watches ?? []) {
      const where = `${label} watches ${watch?.resource?.kind ?? "?"}`;
      const resourceIssues = resourceProblems(where, watch?.resource);
      problems.push(...resourceIssues);
      if (typeof watch?.map !== "function") problems.push(`${where}: map must be a function`);
      if (resourceIssues.length > 0) continue;
      const key = resourceKey(watch.resource);
      if (watchedSeen.has(key)) problems.push(`${where}: watched twice (merge the mappers)`);
      watchedSeen.add(key);
      pushTo(watchers, key, { controller: def, watch });
    }

    const ownTypes = new Set<string>();
    for (const type of def.conditionTypes ?? []) {
      if (typeof type !== "string" || type === "") {
        problems.push(`${label}: empty condition type`);
        continue;
      }
      if (ownTypes.has(type)) problems.push(`${label}: condition type "${type}" is listed twice`);
      ownTypes.add(type);
    }
    if (!Array.isArray(def.conditionTypes)) problems.push(`${label}: conditionTypes must be an array`);
    const policy = def.errorPolicy;
    for (const [field, type] of [
      ["latch", policy?.latch?.condition],
      ["quota", policy?.quota?.condition],
    ] as const) {
      if (type !== undefined && !ownTypes.has(type)) {
        problems.push(`${label}: errorPolicy.${field} condition "${type}" is not among its conditionTypes`);
      }
    }

    const resync = def.resyncSeconds;
    if (!Number.isInteger(resync) || resync < MIN_RESYNC_SECONDS || resync > MAX_RESYNC_SECONDS) {
      problems.push(
        `${label}: resyncSeconds must be an integer in [${MIN_RESYNC_SECONDS}, ${MAX_RESYNC_SECONDS}], got ${String(resync)}`,
      );
    }
    for (const [timing, seconds] of Object.entries(def.requeueSeconds ?? {})) {
      if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) {
        problems.push(`${label}: requeue "${timing}" must be a number of seconds, got ${String(seconds)}`);
      } else if (Number.isInteger(resync) && Math.ceil(seconds) >= resync) {
        problems.push(
          `${label}: requeue "${timing}" (${seconds} s) is not shorter than resyncSeconds (${resync} s), so it would never be sent; return awaitSweep() instead`,
        );
      }
    }
    if (typeof def.reconcile !== "function") problems.push(`${label}: reconcile must be a function`);
    if (def.finalizer) {
      const name = def.finalizer.name;
      const [domain, path, ...rest] = typeof name === "string" ? name.split("/") : [];
      if (!domain || !path || rest.length > 0 || !dnsSubdomain.test(domain))
        problems.push(
          `${label}: finalizer name must be domain-qualified (example.com/name), got ${JSON.stringify(name)}`,
        );
      if (typeof def.finalizer.cleanup !== "function")
        problems.push(`${label}: finalizer cleanup must be a function`);
    }
  });

  if (problems.length > 0) throw new RegistryError(problems);

  const none: readonly never[] = [];
  return {
    controllers: [...definitions],
    controller: (name) => byName.get(name),
    primaryFor: (group, resource) => byResource.get(kindKey(group, resource)),
    primaryForKind: (group, kind) => byKind.get(kindKey(group, kind)),
    ownersOf: (group, resource) => owners.get(kindKey(group, resource)) ?? none,
    watchersOf: (group, resource) => watchers.get(kindKey(group, resource)) ?? none,
  };
}

function resourceProblems(where: string, res: Resource | undefined): string[] {
  if (!res || typeof res !== "object") return [`${where}: missing Resource`];
  const problems: string[] = [];
  if (typeof res.group !== "string" || (res.group !== "" && !dnsSubdomain.test(res.group))) {
    problems.push(`${where}: group must be "" (core) or a DNS subdomain, got ${JSON.stringify(res.group)}`);
  }
  if (typeof res.version !== "string" || !/^v\d+((alpha|beta)\d+)?$/.test(res.version)) {
    problems.push(`${where}: version must look like v1, v1beta1, got ${JSON.stringify(res.version)}`);
  }
  if (typeof res.resource !== "string" || !dnsLabel.test(res.resource)) {
    problems.push(`${where}: resource must be the lowercase plural, got ${JSON.stringify(res.resource)}`);
  }
  if (typeof res.kind !== "string" || !KIND.test(res.kind)) {
    problems.push(`${where}: kind must be CamelCase, got ${JSON.stringify(res.kind)}`);
  }
  if (typeof res.namespaced !== "boolean") problems.push(`${where}: namespaced must be true or false`);
  return problems;
}

function pushTo<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
