/**
 * The `kubefn` command's view of the current cluster: raw REST calls over the user's kubeconfig
 * (the Node transport, so exec plugins and OIDC work as with kubectl) and discovery, which turns an
 * object's apiVersion and kind into its URL.
 */
import { createKube, type Kube, type Transport } from "../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../shared/kube/node.ts";

/** An object as the CLI reads and writes it. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** An API call that did not succeed: its status and the API server's message. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Raw access to one cluster. */
export interface Cluster {
  /** The JSON answer of a call; throws {@link ApiError} on a status of 400 or more. */
  call<T>(
    method: "GET" | "POST" | "PATCH" | "DELETE",
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<T>;
  /** The collection URL of `kind` in `apiVersion` (namespaced: with `namespace`), from discovery. */
  pathOf(apiVersion: string, kind: string, namespace?: string): Promise<string>;
  /** The object, or undefined when it does not exist (404; also when its kind is not served). */
  get<T extends KubeObject>(o: Pick<KubeObject, "apiVersion" | "kind" | "metadata">): Promise<T | undefined>;
  /** The same cluster through kubefn's Kube port, for checks shared with kubefn itself. */
  kube: Kube;
}

/** A {@link Cluster} over `transport`. */
export function clusterOver(transport: Transport): Cluster {
  const discovered = new Map<string, Promise<Array<{ name: string; kind: string; namespaced: boolean }>>>();
  const call = async <T>(
    method: "GET" | "POST" | "PATCH" | "DELETE",
    path: string,
    body?: unknown,
    contentType?: string,
  ) => {
    const res = await transport.request({
      method,
      path,
      ...(body === undefined
        ? {}
        : {
            body: typeof body === "string" ? body : JSON.stringify(body),
            contentType: contentType ?? "application/json",
          }),
    });
    if (res.status >= 400) {
      let message = res.body;
      try {
        message = (JSON.parse(res.body) as { message?: string }).message ?? res.body;
      } catch {}
      throw new ApiError(res.status, `${method} ${path}: ${res.status} ${message}`);
    }
    return JSON.parse(res.body) as T;
  };
  const resources = (apiVersion: string) => {
    let found = discovered.get(apiVersion);
    if (!found) {
      const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      found = call<{ resources: Array<{ name: string; kind: string; namespaced: boolean }> }>(
        "GET",
        path,
      ).then((r) => r.resources.filter((x) => !x.name.includes("/")));
      discovered.set(apiVersion, found);
    }
    return found;
  };
  const pathOf = async (apiVersion: string, kind: string, namespace?: string) => {
    const resource = (await resources(apiVersion)).find((r) => r.kind === kind);
    if (!resource) throw new ApiError(404, `the API server does not serve ${kind} in ${apiVersion}`);
    const prefix = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    return resource.namespaced
      ? `${prefix}/namespaces/${encodeURIComponent(namespace ?? "default")}/${resource.name}`
      : `${prefix}/${resource.name}`;
  };
  return {
    call,
    pathOf,
    kube: createKube(transport),
    async get<T extends KubeObject>(o: Pick<KubeObject, "apiVersion" | "kind" | "metadata">) {
      try {
        const base = await pathOf(o.apiVersion, o.kind, o.metadata.namespace);
        return await call<T>("GET", `${base}/${encodeURIComponent(o.metadata.name)}`);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      }
    },
  };
}

/** The cluster of the user's kubeconfig (`KUBECONFIG`, else ~/.kube/config), or of `file`. */
export function currentCluster(opts: { kubeconfig?: string; context?: string } = {}): Cluster {
  const kc = loadKubeConfig({
    ...(opts.kubeconfig ? { file: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
  });
  return clusterOver(createNodeTransport(kc, { timeoutMs: 30_000 }));
}
