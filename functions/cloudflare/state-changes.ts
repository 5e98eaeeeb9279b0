/**
 * kubefn's state changes on a Queue the user binds (`STATE_CHANGES` in wrangler.toml; optional):
 * one message per change, its body in EventBridge's shape — `source` `kubefn`, `detail-type`,
 * `time`, the versioned `detail` — for the user's own consumer Worker to route.
 */
import type { MessageSendRequest, Queue as QueueBinding } from "@cloudflare/workers-types/index.ts";
import { STATE_CHANGE_SOURCE, type StateChange, type StateChangeSink } from "../../shared/app/index.ts";
import { MAX_BATCH_MESSAGES } from "./queue.ts";

/** The body of a state change's message. */
export interface StateChangeMessage {
  source: typeof STATE_CHANGE_SOURCE;
  "detail-type": StateChange["type"];
  time: string;
  detail: StateChange["detail"];
}

export function stateChangeMessage(change: StateChange): StateChangeMessage {
  return {
    source: STATE_CHANGE_SOURCE,
    "detail-type": change.type,
    time: change.time,
    detail: change.detail,
  };
}

/** The state-change sink on a Queues producer binding: `sendBatch`, {@link MAX_BATCH_MESSAGES} a call. */
export function queueStateChanges(
  binding: Pick<QueueBinding<StateChangeMessage>, "sendBatch">,
): StateChangeSink {
  return {
    async publish(changes) {
      for (let i = 0; i < changes.length; i += MAX_BATCH_MESSAGES) {
        await binding.sendBatch(
          changes
            .slice(i, i + MAX_BATCH_MESSAGES)
            .map((c): MessageSendRequest<StateChangeMessage> => ({ body: stateChangeMessage(c) })),
        );
      }
    },
  };
}
