import type { Context } from "../../runtime/index.ts";
import { EventBatchError, mapEvents, type Registry, requestKey } from "../../runtime/index.ts";
import { type BatchSource, MalformedBatchError, type MappedBatch } from "./app.ts";

const envelopeOf: Record<BatchSource, string> = {
  audit: "an audit.k8s.io/v1 EventList",
  relay: "a kubefn.dev/v1 RelayBatch",
};

/**
 * The intake's `map` over the runtime's event mapping: every request becomes a fresh message
 * (attempt 0), carrying its primary's stored object when the audit event had it, and an envelope
 * the mapping cannot read becomes a 400.
 */
export function mapWithRegistry(
  ctx: Pick<Context, "kube" | "log" | "metrics">,
  registry: Registry,
  selfUsernames: readonly string[],
): (source: BatchSource, batch: unknown) => Promise<MappedBatch> {
  return async (source, batch) => {
    try {
      const mapped = await mapEvents(ctx, registry, batch, { selfUsernames });
      if (mapped.source !== source) {
        throw new MalformedBatchError(`a ${source} sender must send ${envelopeOf[source]}`);
      }
      const { requests, counts, snapshots } = mapped;
      return {
        messages: requests.map((request) => {
          // The stored object from the audit event saves the pass its GET (see MappingResult).
          const stored = snapshots.get(requestKey(request));
          return {
            request,
            attempt: 0,
            trigger: { kind: source },
            ...(stored
              ? {
                  snapshot: stored.object,
                  listedAt: stored.at,
                  ...(stored.object.metadata.uid ? { uid: stored.object.metadata.uid } : {}),
                }
              : {}),
          };
        }),
        counts,
      };
    } catch (err) {
      if (err instanceof EventBatchError) throw new MalformedBatchError(err.message, { cause: err });
      throw err;
    }
  };
}
