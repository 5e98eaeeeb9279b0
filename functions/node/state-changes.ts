/**
 * kubefn's state changes as CloudEvents (spec 1.0) over HTTP to a sink the user names
 * (`STATE_CHANGES_URL`: a Knative broker, Argo Events' webhook, any receiver): one POST per
 * change, in structured mode (`application/cloudevents+json`, the whole event in the body) or
 * binary mode (`ce-*` headers, the detail as the JSON body), `STATE_CHANGES_MODE`.
 */
import { randomUUID } from "node:crypto";
import { cloudEventOf, type StateChange, type StateChangeSink } from "../../shared/app/index.ts";

export type CloudEventsMode = "structured" | "binary";

/** How long one POST may take before it counts as failed. */
export const CLOUD_EVENT_TIMEOUT_MS = 5_000;

/** The request that carries `change` as a CloudEvent in `mode`. */
export function cloudEventRequest(
  change: StateChange,
  mode: CloudEventsMode,
  id: string = randomUUID(),
): { headers: Record<string, string>; body: string } {
  const event = cloudEventOf(change, id);
  if (mode === "structured") {
    return {
      headers: { "content-type": "application/cloudevents+json; charset=utf-8" },
      body: JSON.stringify(event),
    };
  }
  const { data, datacontenttype, ...attributes } = event;
  return {
    headers: {
      "content-type": String(datacontenttype),
      ...Object.fromEntries(Object.entries(attributes).map(([k, v]) => [`ce-${k}`, String(v)])),
    },
    body: JSON.stringify(data),
  };
}

/**
 * The state-change sink on a CloudEvents receiver.
 * @throws Error naming the status when the receiver does not answer 2xx (the runtime logs and counts it).
 */
export function cloudEventsStateChanges(opts: {
  url: string;
  mode: CloudEventsMode;
  fetch?: typeof fetch;
}): StateChangeSink {
  const send = opts.fetch ?? fetch;
  return {
    async publish(changes) {
      for (const change of changes) {
        const { headers, body } = cloudEventRequest(change, opts.mode);
        const res = await send(opts.url, {
          method: "POST",
          headers,
          body,
          signal: AbortSignal.timeout(CLOUD_EVENT_TIMEOUT_MS),
        });
        await res.body?.cancel();
        if (!res.ok) throw new Error(`CloudEvents sink answered ${res.status} to ${change.type}`);
      }
    },
  };
}
