import type { Kube, KubeObject, ListOptions, ListPage, Resource } from "./port.ts";

/** Page size when the caller sets none: the API server's own recommendation for paged lists. */
export const defaultPageSize = 500;

/**
 * Every page of a list, following `continue` until the server has no more.
 *
 * Caveats: a continue token expires after a few minutes (etcd compaction); the server then answers
 * 410 Gone (reason Expired) and this throws. Callers that page slowly should restart the list.
 */
export async function* listPages<T extends KubeObject = KubeObject>(
  kube: Kube,
  res: Resource,
  opts: Omit<ListOptions, "continue"> = {},
): AsyncGenerator<ListPage<T>> {
  let token: string | undefined;
  do {
    const page: ListPage<T> = await kube.list<T>(res, {
      ...opts,
      limit: opts.limit ?? defaultPageSize,
      ...(token ? { continue: token } : {}),
    });
    yield page;
    token = page.continue;
  } while (token);
}

/** All items of a (possibly paged) list, with label and field selectors as in {@link ListOptions}. */
export async function listAll<T extends KubeObject = KubeObject>(
  kube: Kube,
  res: Resource,
  opts: Omit<ListOptions, "continue"> = {},
): Promise<T[]> {
  const items: T[] = [];
  for await (const page of listPages<T>(kube, res, opts)) items.push(...page.items);
  return items;
}
