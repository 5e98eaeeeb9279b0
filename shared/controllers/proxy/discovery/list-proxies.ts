import { type Kube, listAll } from "../../../kube/index.ts";
import type { Log } from "../../../runtime/index.ts";
import { type Proxy as ProxyObject, parseProxy, proxyResource } from "../api.ts";

/**
 * Every Proxy in `namespace` (all namespaces when unset), parsed. Objects that fail the schema are
 * logged and left out: a crawler should never be sent to a proxy the reconciler cannot read.
 */
export async function listProxies(kube: Kube, log: Log, namespace?: string): Promise<ProxyObject[]> {
  const objects = await listAll(kube, proxyResource, namespace ? { namespace } : {});
  return parseProxies(objects, log);
}

/**
 * The Proxies a crawler may see: in `namespace` when given (the caller checked it is in scope),
 * else in each namespace of `scope` (one list each), else in every namespace.
 */
export async function listProxiesInScope(
  kube: Kube,
  log: Log,
  namespace: string | undefined,
  scope: readonly string[] | "*",
): Promise<ProxyObject[]> {
  if (namespace !== undefined || scope === "*") return listProxies(kube, log, namespace);
  const lists = await Promise.all([...new Set(scope)].sort().map((ns) => listProxies(kube, log, ns)));
  return lists.flat();
}

/** The objects that parse as Proxies; the rest are logged at warn level. */
export function parseProxies(objects: readonly unknown[], log: Log): ProxyObject[] {
  const proxies: ProxyObject[] = [];
  for (const obj of objects) {
    const parsed = parseProxy(obj);
    if (parsed.success) proxies.push(parsed.data);
    else {
      const meta = (obj as { metadata?: { namespace?: string; name?: string } }).metadata;
      log.warn("skipping a Proxy that fails the schema", { namespace: meta?.namespace, name: meta?.name });
    }
  }
  return proxies;
}
