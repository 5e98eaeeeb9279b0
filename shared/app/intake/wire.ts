import { createEventRecorder } from "../../kube/index.ts";
import type { Context } from "../../runtime/index.ts";
import {
  EventBatchError,
  INTAKE_CANARY_CONTROLLER,
  INTAKE_CANARY_NAMESPACE,
  INTAKE_RECEIVED_REASON,
  mapEvents,
  type Registry,
  requestKey,
} from "../../runtime/index.ts";
import { type BatchSource, MalformedBatchError, type MappedBatch } from "./app.ts";

const envelopeOf: Record<BatchSource, string> = {
  audit: "an audit.k8s.io/v1 EventList",
  relay: "a kubefn.dev/v1 RelayBatch",
};

/**
 * The intake's `map` over the runtime's event mapping: every request becomes a fresh message
 * (attempt 0) carrying only its key and trigger (and a creation's UID, a precondition) — never a body from the batch, which whoever can
 * write into the channel chose (the pass reads the object itself) — and an envelope
 * the mapping cannot read becomes a 400. Each intake canary the batch created (`kubefn doctor`)
 * is acknowledged with an Event about it, naming the source (see runtime/intake/intake-canary.ts).
 */
export function mapWithRegistry(
  ctx: Pick<Context, "kube" | "log" | "metrics" | "clock" | "seal">,
  registry: Registry,
  selfUsernames: readonly string[],
): (source: BatchSource, batch: unknown) => Promise<MappedBatch> {
  return async (source, batch) => {
    try {
      const mapped = await mapEvents(ctx, registry, batch, {
        selfUsernames,
        ...(ctx.seal ? { seal: ctx.seal } : {}),
      });
      if (mapped.source !== source) {
        throw new MalformedBatchError(`a ${source} sender must send ${envelopeOf[source]}`);
      }
      const { requests, reasons, uids, counts } = mapped;
      if (mapped.canaries.length > 0) await acknowledgeCanaries(ctx, source, mapped.canaries);
      return {
        messages: requests.map((request) => {
          const key = requestKey(request);
          const reason = reasons.get(key);
          const uid = uids.get(key);
          return {
            request,
            attempt: 0,
            // The created object's UID: a precondition of the pass's first write (createdReason).
            ...(uid ? { uid } : {}),
            trigger: { kind: source, ...(reason ? { reason } : {}) },
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

const sourceName: Record<BatchSource, string> = {
  audit: "the API server's audit webhook (or an audit log export)",
  relay: "the relay",
};

/** One Event per canary: intake received its creation from `source`. */
async function acknowledgeCanaries(
  ctx: Pick<Context, "kube" | "log" | "clock">,
  source: BatchSource,
  names: readonly string[],
): Promise<void> {
  const events = createEventRecorder(ctx.kube, {
    controller: INTAKE_CANARY_CONTROLLER,
    now: () => ctx.clock.now(),
    onError: (err) => ctx.log.warn("intake canary not acknowledged", { source, error: String(err) }),
  });
  for (const name of names) {
    await events.record(
      { apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: INTAKE_CANARY_NAMESPACE, name } },
      {
        type: "Normal",
        reason: INTAKE_RECEIVED_REASON,
        action: "Receive",
        note: `kubefn's intake received the creation of ${name} from ${sourceName[source]}`,
      },
    );
  }
  ctx.log.info("intake canary acknowledged", { source, canaries: names.join(",") });
}
