import { errorFromResponse, errorFromTransportFailure } from "./errors.ts";
import { apiVersionOf, keyOf, resourcePath } from "./paths.ts";
import type {
  DeleteOptions,
  Kube,
  KubeObject,
  ListOptions,
  ListPage,
  ObjectKey,
  Patch,
  Resource,
  Transport,
  TransportRequest,
  WriteOptions,
} from "./port.ts";

export interface CreateKubeOptions {
  /** Field manager for writes that name none. Default "kubefn". */
  fieldManager?: string;
}

/** Metadata-only lists, falling back to full JSON where the server cannot (it always can since 1.15). */
const metadataListAccept =
  "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

const contentTypeByPatch: Record<Patch["type"], string> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  apply: "application/apply-patch+yaml",
};

/**
 * The {@link Kube} port over a {@link Transport}: builds paths and bodies, decodes answers, and
 * turns every failure into a typed `KubeError` (errors.ts).
 *
 * Caveats: list items come back from the server without `apiVersion`/`kind` for built-in kinds;
 * they are filled in from `res` so every object this returns is complete. Server-side apply sends
 * JSON (valid YAML) with the patch's own field manager, not the default.
 *
 * @example
 * const kube = createKube(createFetchTransport({ server, token }));
 * const cm = await kube.get(Resources.ConfigMap, { namespace: "default", name: "settings" });
 */
export function createKube(transport: Transport, options: CreateKubeOptions = {}): Kube {
  const defaultFieldManager = options.fieldManager ?? "kubefn";

  async function call<T>(req: TransportRequest): Promise<T> {
    let res: Awaited<ReturnType<Transport["request"]>>;
    try {
      res = await transport.request(req);
    } catch (err) {
      throw errorFromTransportFailure(err, req);
    }
    if (res.status < 200 || res.status > 299) throw errorFromResponse(res, req);
    return (res.body === "" ? undefined : JSON.parse(res.body)) as T;
  }

  function writeQuery(
    opts: WriteOptions | undefined,
    fieldManager = opts?.fieldManager ?? defaultFieldManager,
  ) {
    return { fieldManager, dryRun: opts?.dryRun ? "All" : undefined };
  }

  function objectPath(
    res: Resource,
    key: ObjectKey,
    subresource?: "status",
    query?: Record<string, string | undefined>,
  ) {
    return resourcePath(res, { namespace: key.namespace, name: key.name, subresource, query });
  }

  function withTypeMeta<T extends KubeObject>(res: Resource, obj: T): T {
    return obj.apiVersion && obj.kind ? obj : { ...obj, apiVersion: apiVersionOf(res), kind: res.kind };
  }

  async function put<T extends KubeObject>(
    res: Resource,
    obj: KubeObject,
    sub: "status" | undefined,
    opts?: WriteOptions,
  ) {
    return call<T>({
      method: "PUT",
      path: objectPath(res, keyOf(obj), sub, writeQuery(opts)),
      contentType: "application/json",
      body: JSON.stringify(withTypeMeta(res, obj)),
    });
  }

  async function patch<T extends KubeObject>(
    res: Resource,
    key: ObjectKey,
    p: Patch,
    sub: "status" | undefined,
    opts?: WriteOptions,
  ) {
    const query =
      p.type === "apply"
        ? { ...writeQuery(opts, p.fieldManager), force: p.force ? "true" : undefined }
        : writeQuery(opts);
    const body = p.type === "merge" ? p.body : p.type === "json" ? p.ops : withTypeMeta(res, p.body);
    return call<T>({
      method: "PATCH",
      path: objectPath(res, key, sub, query),
      contentType: contentTypeByPatch[p.type],
      body: JSON.stringify(body),
    });
  }

  return {
    get<T extends KubeObject>(res: Resource, key: ObjectKey) {
      return call<T>({ method: "GET", path: objectPath(res, key) });
    },

    async list<T extends KubeObject>(res: Resource, opts: ListOptions = {}): Promise<ListPage<T>> {
      const list = await call<{
        items: T[] | null;
        metadata?: { resourceVersion?: string; continue?: string };
      }>({
        method: "GET",
        path: resourcePath(res, {
          namespace: opts.namespace,
          query: {
            labelSelector: opts.labelSelector || undefined,
            fieldSelector: opts.fieldSelector || undefined,
            limit: opts.limit,
            continue: opts.continue || undefined,
            resourceVersion: opts.resourceVersion || undefined,
          },
        }),
        ...(opts.metadataOnly ? { accept: metadataListAccept } : {}),
      });
      const page: ListPage<T> = {
        items: (list.items ?? []).map((item) =>
          opts.metadataOnly
            ? ({ ...item, apiVersion: apiVersionOf(res), kind: res.kind } as T)
            : withTypeMeta(res, item),
        ),
        resourceVersion: list.metadata?.resourceVersion ?? "",
      };
      if (list.metadata?.continue) page.continue = list.metadata.continue;
      return page;
    },

    create<T extends KubeObject>(res: Resource, obj: KubeObject, opts?: WriteOptions) {
      return call<T>({
        method: "POST",
        path: resourcePath(res, { namespace: obj.metadata.namespace, query: writeQuery(opts) }),
        contentType: "application/json",
        body: JSON.stringify(withTypeMeta(res, obj)),
      });
    },

    update<T extends KubeObject>(res: Resource, obj: KubeObject, opts?: WriteOptions) {
      return put<T>(res, obj, undefined, opts);
    },

    patch<T extends KubeObject>(res: Resource, key: ObjectKey, p: Patch, opts?: WriteOptions) {
      return patch<T>(res, key, p, undefined, opts);
    },

    async delete(res: Resource, key: ObjectKey, opts: DeleteOptions = {}) {
      const body = { kind: "DeleteOptions", apiVersion: "v1", ...opts };
      await call<unknown>({
        method: "DELETE",
        path: objectPath(res, key),
        contentType: "application/json",
        body: JSON.stringify(body),
      });
    },

    updateStatus<T extends KubeObject>(res: Resource, obj: KubeObject, opts?: WriteOptions) {
      return put<T>(res, obj, "status", opts);
    },

    patchStatus<T extends KubeObject>(res: Resource, key: ObjectKey, p: Patch, opts?: WriteOptions) {
      return patch<T>(res, key, p, "status", opts);
    },
  };
}
