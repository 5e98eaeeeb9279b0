/**
 * The Kubernetes port: everything the core needs from an API server, for any kind, addressed by
 * group/version/resource. One implementation (`createKube`) sits on a {@link Transport}; the
 * transports differ only in how a request reaches the server and is authenticated.
 */

/** Where a kind lives in the API. `group` is "" for the core group. */
export interface Resource {
  readonly group: string;
  readonly version: string;
  /** Plural resource name, e.g. "proxies". */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

/** Any Kubernetes object. Controllers narrow it with their zod schema. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface ListPage<T extends KubeObject = KubeObject> {
  items: T[];
  resourceVersion: string;
  /** Set when the server has more; pass it back as `continue`. */
  continue?: string;
}

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  /**
   * "0" lets the API server answer from its watch cache (any recent state, no etcd read); unset
   * asks for the latest state (a quorum read).
   */
  resourceVersion?: string;
  /**
   * Ask for a `PartialObjectMetadataList`: items carry only `metadata` (no spec, status or data),
   * typed as `res`'s kind. Enough when the caller reads only names, labels, owners, versions.
   */
  metadataOnly?: boolean;
}

export type Patch =
  | { type: "merge"; body: unknown }
  | { type: "json"; ops: JsonPatchOp[] }
  | { type: "apply"; body: KubeObject; fieldManager: string; force?: boolean };

export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test" | "move" | "copy";
  path: string;
  value?: unknown;
  from?: string;
}

export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: "Foreground" | "Background" | "Orphan";
  gracePeriodSeconds?: number;
}

/** Identifies one object. `namespace` is omitted for cluster-scoped kinds. */
export interface ObjectKey {
  namespace?: string;
  name: string;
}

/**
 * Kubernetes API access. Every method throws a typed {@link KubeError} (see `errors.ts`) on a
 * non-2xx answer or a network failure.
 *
 * Caveats: `update` and `updateStatus` are guarded by `metadata.resourceVersion` when the object
 * carries one (a stale version gets `ConflictError`); `patch` is not unless the patch body says so.
 */
export interface Kube {
  get<T extends KubeObject = KubeObject>(res: Resource, key: ObjectKey): Promise<T>;
  /** One page. Use `listAll` from `list.ts` to follow `continue`. */
  list<T extends KubeObject = KubeObject>(res: Resource, opts?: ListOptions): Promise<ListPage<T>>;
  create<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject, opts?: WriteOptions): Promise<T>;
  update<T extends KubeObject = KubeObject>(res: Resource, obj: KubeObject, opts?: WriteOptions): Promise<T>;
  patch<T extends KubeObject = KubeObject>(
    res: Resource,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T>;
  delete(res: Resource, key: ObjectKey, opts?: DeleteOptions): Promise<void>;
  updateStatus<T extends KubeObject = KubeObject>(
    res: Resource,
    obj: KubeObject,
    opts?: WriteOptions,
  ): Promise<T>;
  patchStatus<T extends KubeObject = KubeObject>(
    res: Resource,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T>;
}

export interface WriteOptions {
  /** Field manager recorded in managedFields. Defaults to "kubefn". */
  fieldManager?: string;
  dryRun?: boolean;
}

/** One HTTP exchange with the API server, as the transports see it. */
export interface TransportRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Absolute path with query string, e.g. "/api/v1/namespaces/default/pods?limit=500". */
  path: string;
  contentType?: string;
  /** The Accept header; `application/json` when unset. */
  accept?: string;
  body?: string;
  signal?: AbortSignal;
}

export interface TransportResponse {
  status: number;
  headers: Headers;
  body: string;
}

/**
 * How requests reach the API server. Implementations authenticate and carry TLS; they never
 * interpret status codes (that is `createKube`'s job).
 */
export interface Transport {
  request(req: TransportRequest): Promise<TransportResponse>;
}
