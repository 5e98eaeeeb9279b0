import { type Kube, type KubeObject, listAll } from "../../../kube/index.ts";
import type { Log, Metrics, StatusSeal } from "../../../runtime/index.ts";
import { type Proxy as ProxyObject, parseProxy, proxyResource } from "../api.ts";

/** What the crawler API reads Proxies with: the seal, when kubefn has one, decides what is served. */
export interface CrawlerReads {
  kube: Kube;
  log: Log;
  metrics?: Pick<Metrics, "count">;
  seal?: StatusSeal;
}

/**
 * Every Proxy in `namespace` (all namespaces when unset), parsed. Objects that fail the schema are
 * logged and left out: a crawler should never be sent to a proxy the reconciler cannot read. So
 * are those whose status does not carry kubefn's seal ({@link servedStatus}).
 */
export async function listProxies(reads: CrawlerReads, namespace?: string): Promise<ProxyObject[]> {
  const objects = await listAll(reads.kube, proxyResource, namespace ? { namespace } : {});
  const served: KubeObject[] = [];
  for (const object of objects) if (await servedStatus(reads, object)) served.push(object);
  return parseProxies(served, reads.log);
}

/**
 * Whether a Proxy's status may be handed to crawlers: kubefn sealed it (runtime/core/status-seal.ts).
 * A status written with a stolen kubefn token (an `ip` of the thief's choosing and `phase: Ready`)
 * or never sealed is not served — until a pass rewrites it (intake and the sweep send that pass);
 * it is logged and counted (`kubefn_crawler_unsealed_proxies_total`). Without a seal (no key:
 * statuses are neither sealed nor checked) every status is served.
 *
 * Caveats: checked on the object as the API server returned it, before parsing (which may drop or
 * default fields the seal covers).
 */
export async function servedStatus(reads: CrawlerReads, object: KubeObject): Promise<boolean> {
  if (!reads.seal) return true;
  const verdict = await reads.seal.verify(object);
  if (verdict === "sealed") return true;
  reads.log.warn("Proxy not served to crawlers: its status does not carry kubefn's seal", {
    namespace: object.metadata.namespace,
    name: object.metadata.name,
    verdict,
  });
  reads.metrics?.count("kubefn_crawler_unsealed_proxies_total", { verdict });
  return false;
}

/**
 * The Proxies a crawler may see: in `namespace` when given (the caller checked it is in scope),
 * else in each namespace of `scope` (one list each), else in every namespace.
 */
export async function listProxiesInScope(
  reads: CrawlerReads,
  namespace: string | undefined,
  scope: readonly string[] | "*",
): Promise<ProxyObject[]> {
  if (namespace !== undefined || scope === "*") return listProxies(reads, namespace);
  const lists = await Promise.all([...new Set(scope)].sort().map((ns) => listProxies(reads, ns)));
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
