import { ForbiddenError, ReconcileError } from "../../../kube/index.ts";

/**
 * Where a Proxy's instance runs: a Pod, a cloud VM. The reconciler observes instances only by
 * polling {@link Provider.get}; providers never watch.
 *
 * Every method throws a {@link ProviderError} (already classified) for a failure, and
 * {@link ProviderNotFoundError} from `get` when the instance does not exist.
 */
export interface Provider {
  /**
   * Creates the instance named `req.name`. Idempotent under concurrent passes: when the name is
   * taken by an instance carrying the request's owner tag, that instance is returned.
   *
   * Caveats: a name taken by anything else is a permanent `NameConflict`; a freshly created
   * instance is usually `Provisioning` — poll `get` for its address.
   */
  create(req: CreateRequest): Promise<Instance>;
  /**
   * The instance behind a providerID returned by `create`, if it carries the owner tag `owner`
   * (the Proxy's UID). Throws {@link ProviderNotFoundError} when it does not exist or belongs to
   * someone else: a providerID is tenant-writable (`status.providerID`), never a pointer to follow.
   */
  get(id: string, owner: string): Promise<Instance>;
  /**
   * Starts deleting the instance, after reading it again: only if it carries `guard.owner`'s tag
   * and, when `guard.uid` is given, is that very instance (not a same-named successor); the
   * delete itself is preconditioned on the instance's UID where the provider supports it. An
   * instance that is already gone, or is not the guarded one, is not an error: nothing happens.
   */
  delete(id: string, guard: DeleteGuard): Promise<void>;
  /**
   * Every instance carrying `tag`, across whatever scope the provider manages (orphan GC), or,
   * for a {@link Provider.namespaced} provider given `scope`, in that namespace only.
   */
  listByTag(tag: Tag, scope?: ListScope): Promise<Instance[]>;
  /**
   * True when instances live in their Proxy's namespace (the pod provider): kubefn may reach them
   * only where the namespace opted in (RoleBinding kubefn-tenant), and a refusal there throws
   * {@link NamespaceNotOptedInError}.
   */
  readonly namespaced?: boolean;
}

/** Where a namespaced provider lists: one namespace. */
export interface ListScope {
  namespace: string;
}

/** Condition reason and error reason of a Proxy whose namespace did not grant kubefn access. */
export const namespaceNotOptedInReason = "NamespaceNotOptedIn";

/** The command a namespace's admin runs to opt in (binds ClusterRole kubefn-tenant to kubefn there). */
export function optInCommand(namespace: string): string {
  return (
    `kubectl create rolebinding kubefn-tenant -n ${namespace} --clusterrole=kubefn-tenant ` +
    "--serviceaccount=kubefn-system:kubefn"
  );
}

/**
 * Whether a 403 is RBAC's refusal (no grant: "… cannot get resource …"), not an admission
 * policy's or a quota's.
 */
export function isRbacRefusal(err: unknown): boolean {
  return err instanceof ForbiddenError && /\bcannot [a-z]+ resource\b/.test(err.message);
}

/** Providers by the name a Proxy's `spec.provider` uses. */
export type ProvidersByName = Readonly<Record<string, Provider>>;

/** Which instance a delete may remove: see {@link Provider.delete}. */
export interface DeleteGuard {
  /** The Proxy UID the instance's owner tag must carry. */
  owner: string;
  /** The provider's own UID of the instance observed ({@link Instance.uid}). */
  uid?: string | undefined;
}

export interface Tag {
  key: string;
  value: string;
}

/** What the Proxy asks of its instance; every field is optional and defaulted by the provider. */
export interface InstanceShape {
  image?: string;
  machineType?: string;
  zone?: string;
  /** Extra labels from the Proxy spec. Owner tags win over them. */
  labels?: Record<string, string>;
}

export interface CreateRequest {
  /** Deterministic, from the Proxy UID: see {@link nameFromUID}. */
  name: string;
  /** The Proxy's namespace (the pod provider creates the Pod there). */
  namespace: string;
  /** Rendered cloud-init user data. Secret material: never log it. */
  cloudInit?: string;
  instance: InstanceShape;
  /** Must include {@link ownerTagKey}; see {@link ownerTags}. */
  tags: Record<string, string>;
}

export type InstanceState = "Provisioning" | "Running" | "Stopped" | "Terminating";

export interface Instance {
  /** providerID: "kubernetes://ns/name", "gce://project/zone/name". Pass it back to get/delete. */
  id: string;
  state: InstanceState;
  /** Set once the instance is Running and has an address. */
  ip?: string;
  /**
   * Tags as the provider stores them, after its label sanitising — except {@link ownerTagKey} and
   * {@link managedByTagKey}, which every provider reports under these canonical keys.
   */
  tags: Record<string, string>;
  /** When the provider created it (RFC 3339), for the orphan collector's grace period. */
  createdAt?: string;
  /** The provider's own unique ID of this incarnation (Pod UID, GCE instance id). */
  uid?: string;
}

/** The tag naming the Proxy (by UID) an instance belongs to. */
export const ownerTagKey = "crawl.kubefn.dev/proxy-uid";
/** The tag marking an instance as made by kubefn. */
export const managedByTagKey = "crawl.kubefn.dev/managed-by";
export const managedByTagValue = "kubefn";

/** The tags every instance of the Proxy with `uid` must carry. */
export function ownerTags(uid: string): Record<string, string> {
  return { [ownerTagKey]: uid, [managedByTagKey]: managedByTagValue };
}

const nameHexChars = 20;

/**
 * The instance name for a Proxy: "px-" and the first 20 hex digits of its UID. A valid DNS-1123
 * label and GCE instance name; deterministic, so a concurrent second create gets AlreadyExists.
 *
 * @example
 * nameFromUID("3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6") // "px-3f2a9c4e1b7d4e8f9a0b"
 */
export function nameFromUID(uid: string): string {
  const hex = uid.toLowerCase().replace(/-/g, "");
  if (!/^[0-9a-f]+$/.test(hex) || hex.length < nameHexChars) {
    throw new ProviderError("permanent", "InvalidUID", `not a UUID: ${JSON.stringify(uid)}`);
  }
  return `px-${hex.slice(0, nameHexChars)}`;
}

/** The failure classes a provider can report; see `classifyError` in shared/kube. */
export type ProviderErrorClass = "quota" | "permanent" | "transient";

/**
 * A failed provider call, classified where the provider's API is understood: a
 * `ReconcileError` of a provider's classes, so the executor's `classifyError` trusts
 * `errorClass` and `reason`, and the Proxy's error policy knows it for the provider's answer.
 *
 * `reason` is a stable CamelCase word fit for a condition (QuotaExceeded, Invalid, NameConflict,
 * Unavailable, ...); the message carries the provider's own words.
 */
export class ProviderError extends ReconcileError {
  override name = "ProviderError";
  declare readonly errorClass: ProviderErrorClass;

  constructor(
    errorClass: ProviderErrorClass,
    reason: string,
    message: string,
    opts: { cause?: unknown; retryAfterSeconds?: number | undefined } = {},
  ) {
    super(errorClass, reason, message, opts);
  }
}

/**
 * The instance does not exist. Not a {@link ProviderError}: absence is an expected answer that
 * the reconciler handles (clear the providerID and create again, or drop the finalizer).
 *
 * Caveats: it carries no `errorClass`; if it escapes a pass, the executor's default applies.
 */
export class ProviderNotFoundError extends Error {
  override name = "ProviderNotFoundError";
  readonly reason = "InstanceNotFound";
  readonly id: string;

  constructor(id: string, opts: { cause?: unknown; notOwnedBy?: string } = {}) {
    super(
      opts.notOwnedBy === undefined
        ? `instance ${id} not found`
        : `instance ${id} does not carry ${ownerTagKey}=${opts.notOwnedBy}: not this Proxy's`,
      opts.cause === undefined ? undefined : { cause: opts.cause },
    );
    this.id = id;
  }
}

export function isProviderNotFound(err: unknown): err is ProviderNotFoundError {
  return err instanceof ProviderNotFoundError;
}

/** Whether `instance` carries the owner tag `owner` (compared after the provider's sanitising). */
export function isOwnedBy(instance: Instance, owner: string, sanitise: (v: string) => string): boolean {
  return owner !== "" && instance.tags[ownerTagKey] === sanitise(owner);
}

/** The owner tag of a create request; a request without one cannot be made idempotent. */
export function requireOwnerTag(req: CreateRequest): string {
  const uid = req.tags[ownerTagKey];
  if (uid === undefined || uid === "") {
    throw new ProviderError("permanent", "InvalidRequest", `create ${req.name}: tags lack ${ownerTagKey}`);
  }
  return uid;
}

/**
 * The answer to a create that hit an existing name: the existing instance when its
 * {@link ownerTagKey} is `owner`, else a permanent `NameConflict`.
 */
export function adoptExisting(existing: Instance, owner: string, name: string, cause?: unknown): Instance {
  if (existing.tags[ownerTagKey] === owner) return existing;
  throw new ProviderError(
    "permanent",
    "NameConflict",
    `an instance named ${name} exists (${existing.id}) but does not carry ${ownerTagKey}=${owner}`,
    { cause },
  );
}

/**
 * kubefn may not read or write the Secrets or Pods of `namespace`: it did not opt in (no
 * RoleBinding of kubefn-tenant there, and no cluster-wide one). Transient: retried with backoff,
 * and the sweep sends a pass once the namespace reads well. An empty namespace means the
 * cluster-wide list was refused (the install binds kubefn-tenant per namespace).
 */
export class NamespaceNotOptedInError extends ProviderError {
  override name = "NamespaceNotOptedInError";
  readonly namespace: string;
  constructor(namespace: string, what: string, cause?: unknown) {
    super(
      "transient",
      namespaceNotOptedInReason,
      namespace === ""
        ? `${what}: kubefn may not read every namespace (kubefn-tenant is bound per namespace)`
        : `namespace ${namespace} has not opted in to kubefn (${what} refused); its admin opts in with: ${optInCommand(namespace)}`,
      { cause },
    );
    this.namespace = namespace;
  }
}

export function isNamespaceNotOptedIn(err: unknown): err is NamespaceNotOptedInError {
  return err instanceof NamespaceNotOptedInError;
}
