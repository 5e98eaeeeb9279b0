import type { Kube, KubeObject, ObjectKey, Resource } from "../../kube/index.ts";
import { fnv1a32, isNotFound } from "../../kube/index.ts";
import type { Context, SweepMemo } from "../core/index.ts";

/**
 * Why the sweep sends a primary a pass: a short, stable token (it is a metric label), e.g.
 * `generation`, `missing:ConfigMap`, `changed:StatefulSet`, `instance-gone`, `status:Ready`.
 */
export type DriftReason = string;

/** One list the sweep makes per drift period for a controller's decision (an owned kind, say). */
export interface DriftList {
  /** The name the decision looks the objects up by. */
  name: string;
  resource: Resource;
  /** List one namespace only (where the grant to list is a Role); default every namespace. */
  namespace?: string;
  labelSelector?: string;
  /**
   * Ask for metadata only (`PartialObjectMetadataList`): names, labels, owners, versions. Use it
   * wherever the decision reads nothing else — it is a fraction of the bytes, and for Namespaces or
   * Secrets it keeps bodies out of the sweep.
   */
  metadataOnly?: boolean;
  /**
   * List per page of primaries instead of once per period: only the objects whose label `label`
   * holds the `value` of one of the page's primaries (a set-based selector `label in (…)` added to
   * `labelSelector`, cut into chunks that keep each URL short). The sweep then holds the owned
   * objects of one page of primaries, never those of the whole fleet, for about the same number of
   * requests when each primary owns about one object of the kind.
   *
   * Caveats: an object without the label (a foreign one squatting on a derived name) is not seen;
   * the decision must not read its absence as "free" where that matters.
   */
  perPage?: { label: string; value(primary: KubeObject): string | undefined };
}

/** The objects the sweep listed this period, by list name and key. */
export interface Listed {
  /** The listed object of this key, or undefined when the list did not hold it. */
  get(list: string, key: ObjectKey): KubeObject | undefined;
  /** False when the list failed this sweep (e.g. the kind is not served): decide without it. */
  available(list: string): boolean;
}

/** What a decision sees of one primary. */
export interface DriftInput<S> {
  primary: KubeObject;
  listed: Listed;
  /** What `load` fetched once for this sweep (operator configuration, provider instances). */
  shared: S;
  now: Date;
}

/**
 * How a controller finds drift from lists instead of passes: the sweep lists `lists` once per drift
 * period (label-selected, paged, from the watch cache), calls `load` once, then asks `decide` of
 * every primary, page by page. Only primaries with a reason get a message.
 *
 * `decide` must be pure and cheap: it runs for every object every period, and may be async only
 * for pure computation (a hash) or memoised per-sweep reads that `load` set up (one read per
 * distinct Secret, never one per object). It answers "would a pass change or learn anything?" — an owned object missing or changed, an instance gone, a spec
 * hash moved, a status that no longer says what the lists show, a condition that waits on time.
 *
 * Caveats: a decision that returns a reason for an object its pass cannot fix sends that object a
 * pass every period (a hot loop of one pass per period, not a storm); keep "the pass already
 * reported this" cases (a conflict shown in a condition) quiet. A decision that throws sends the
 * pass anyway (reason `decide-error`). The safety net revisits every object regardless.
 */
export interface DriftDeclaration<S = unknown> {
  lists?: readonly DriftList[];
  /** Shared reads for the whole sweep, once per drift period (a few requests, never per object). */
  load?(ctx: Context, memo: SweepMemo): Promise<S>;
  decide(input: DriftInput<S>): DriftReason | undefined | Promise<DriftReason | undefined>;
  /**
   * The listed objects a pass sent for this primary will read (full objects only, never
   * metadata-only ones), attached to its message so the pass reads nothing the sweep holds.
   */
  attach?(input: DriftInput<S>): KubeObject[];
}

/** Keeps the declared state type `S` inside a declaration stored as {@link DriftDeclaration}. */
export function defineDrift<S>(declaration: DriftDeclaration<S>): DriftDeclaration {
  return declaration as DriftDeclaration;
}

/** Default of the per-object safety net: a pass a day whatever the lists say. */
export const DEFAULT_SAFETY_NET_SECONDS = 86_400;
/** Page size of the sweep's lists. */
export const SWEEP_PAGE_SIZE = 500;
/** Most characters of label values in one per-page selector (Workers cap a URL at 16 KB). */
export const PER_PAGE_SELECTOR_CHARS = 6_000;

/**
 * Which list slot `now` falls in when the sweep runs every `periodSeconds`: slots are at least a
 * minute long, so a sweep every 10 s sees each slot several times and a sweep every 2 minutes
 * reaches every one.
 */
export function sweepSlot(now: Date, periodSeconds: number): { slot: number; slotSeconds: number } {
  const slotSeconds = Math.max(60, periodSeconds);
  return { slot: Math.floor(now.getTime() / (slotSeconds * 1000)), slotSeconds };
}

/**
 * Whether a controller's drift lists are due at `now`: once per `driftSeconds`, in the first slot
 * of each period (every controller in the same slot, so a sweep either lists or it does not).
 */
export function driftDue(now: Date, driftSeconds: number, periodSeconds: number): boolean {
  const { slot, slotSeconds } = sweepSlot(now, periodSeconds);
  return slot % Math.max(1, Math.ceil(driftSeconds / slotSeconds)) === 0;
}

/**
 * Whether an object is in this slot's share of a spread: over any `everySeconds`, each object
 * (spread by the FNV-1a hash of its UID) falls due exactly once. The safety net, and the resync of
 * a controller without a drift declaration.
 */
export function dueThisSlot(
  object: KubeObject,
  now: Date,
  everySeconds: number,
  periodSeconds: number,
): boolean {
  const { slot, slotSeconds } = sweepSlot(now, periodSeconds);
  const buckets = Math.max(1, Math.ceil(everySeconds / slotSeconds));
  const meta = object.metadata;
  return fnv1a32(meta.uid ?? `${meta.namespace ?? ""}/${meta.name ?? ""}`) % buckets === slot % buckets;
}

/**
 * Lists every `lists` entry without `perPage` once (paged, `resourceVersion=0`, `managedFields`
 * dropped) into an index by key. A list that fails is logged, counted and marked unavailable; the
 * rest go on.
 *
 * Caveats: the index holds every object of these lists for the length of the controller's
 * decisions: keep whole-period lists for kinds that do not grow with the fleet, and declare
 * `perPage` for owned kinds (see {@link listForPage}). The primaries are never held whole.
 */
export async function listForDrift(
  ctx: Pick<Context, "kube" | "log" | "metrics">,
  controller: string,
  lists: readonly DriftList[],
  pageSize = SWEEP_PAGE_SIZE,
): Promise<Listed> {
  const index = new Map<string, Map<string, KubeObject>>();
  for (const list of lists) {
    if (!list.perPage) await indexList(ctx, controller, index, list, [list.labelSelector], pageSize, trimmed);
  }
  return listedOf(index);
}

/**
 * The `perPage` lists of one page of primaries: for each, the objects labelled with one of the
 * page's values (`label in (…)`, chunked to {@link PER_PAGE_SELECTOR_CHARS}), paged. Failures as
 * in {@link listForDrift}, for this page only. The index lives as long as the page's decisions.
 */
export async function listForPage(
  ctx: Pick<Context, "kube" | "log" | "metrics">,
  controller: string,
  lists: readonly DriftList[],
  primaries: readonly KubeObject[],
  pageSize = SWEEP_PAGE_SIZE,
): Promise<Listed> {
  const index = new Map<string, Map<string, KubeObject>>();
  for (const list of lists) {
    const { perPage } = list;
    if (!perPage) continue;
    const values = [...new Set(primaries.flatMap((p) => perPage.value(p) ?? []))].sort();
    const selectors = selectorChunks(values).map((chunk) =>
      [list.labelSelector, `${perPage.label} in (${chunk.join(",")})`].filter(Boolean).join(","),
    );
    await indexList(ctx, controller, index, list, selectors, pageSize, (item) => item);
  }
  return listedOf(index);
}

/**
 * Lists `list` once per label selector into `index` under its name, each object through `keep`. A
 * list that fails is logged, counted and left out of `index` (unavailable); a 404 is only counted.
 */
async function indexList(
  ctx: Pick<Context, "kube" | "log" | "metrics">,
  controller: string,
  index: Map<string, Map<string, KubeObject>>,
  list: DriftList,
  labelSelectors: readonly (string | undefined)[],
  pageSize: number,
  keep: (item: KubeObject) => KubeObject,
): Promise<void> {
  const byKey = new Map<string, KubeObject>();
  try {
    for (const labelSelector of labelSelectors) {
      for await (const page of pagesOf(ctx.kube, list.resource, {
        ...(list.namespace ? { namespace: list.namespace } : {}),
        ...(labelSelector ? { labelSelector } : {}),
        ...(list.metadataOnly ? { metadataOnly: true } : {}),
        limit: pageSize,
      })) {
        for (const item of page) byKey.set(keyString(item.metadata), keep(item));
      }
    }
    index.set(list.name, byKey);
  } catch (err) {
    // A kind the cluster does not serve (404: e.g. no Gateway API) is an answer, not a fault:
    // the decision sees the list unavailable, as the pass sees the kind missing.
    if (isNotFound(err)) {
      ctx.metrics.count("kubefn_sweep_lists_unavailable_total", { controller, list: list.name });
      return;
    }
    ctx.log.error("sweep drift list failed", { controller, list: list.name, error: String(err) });
    ctx.metrics.count("kubefn_sweep_errors_total", { controller, stage: `list:${list.name}` });
  }
}

/** One view over several indexes (a period's lists and a page's), the first holding a list wins. */
export function combineListed(...parts: readonly Listed[]): Listed {
  return {
    get: (list, key) => parts.find((p) => p.available(list))?.get(list, key),
    available: (list) => parts.some((p) => p.available(list)),
  };
}

function listedOf(index: Map<string, Map<string, KubeObject>>): Listed {
  return {
    get: (list, key) => index.get(list)?.get(keyString(key)),
    available: (list) => index.has(list),
  };
}

/** Values cut into groups of at most {@link PER_PAGE_SELECTOR_CHARS} characters (none when empty). */
function selectorChunks(values: readonly string[]): string[][] {
  const chunks: string[][] = [];
  let chunk: string[] = [];
  let chars = 0;
  for (const value of values) {
    if (chunk.length > 0 && chars + value.length + 1 > PER_PAGE_SELECTOR_CHARS) {
      chunks.push(chunk);
      chunk = [];
      chars = 0;
    }
    chunk.push(value);
    chars += value.length + 1;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * A list, page by page: the first page from the watch cache (`resourceVersion=0`), the
 * rest by `continue` (the API server allows no resourceVersion beside a continue token).
 *
 * Caveats: a continue token that expires mid-list (410 Gone) throws; the caller skips the list
 * this sweep.
 */
export async function* pagesOf(
  kube: Kube,
  resource: Resource,
  opts: { namespace?: string; labelSelector?: string; metadataOnly?: boolean; limit: number },
): AsyncGenerator<KubeObject[]> {
  let token: string | undefined;
  do {
    const page = await kube.list(resource, {
      ...opts,
      ...(token ? { continue: token } : { resourceVersion: "0" }),
    });
    yield page.items.map(trimmed);
    token = page.continue;
  } while (token);
}

function keyString(key: { namespace?: string | undefined; name?: string | undefined }): string {
  return `${key.namespace ?? ""}/${key.name ?? ""}`;
}

function trimmed(object: KubeObject): KubeObject {
  if (!object.metadata.managedFields) return object;
  const { managedFields: _, ...metadata } = object.metadata;
  return { ...object, metadata };
}
