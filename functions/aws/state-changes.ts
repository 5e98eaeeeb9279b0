/**
 * kubefn's state changes on an EventBridge bus the user names (`STATE_CHANGES_BUS`), for their
 * rules to route to SNS, Slack, Step Functions or another account, with archive and replay.
 *
 * Every event: `source` `kubefn`, `detail-type` one of `StateChangeType` (`<Kind> Unhealthy`, …),
 * `detail` the versioned `StateChangeDetail` (`detail.version` "1"), `resources` empty (an object
 * is not an ARN). The schema is in docs/monitoring.md.
 */
import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from "@aws-sdk/client-eventbridge";
import { STATE_CHANGE_SOURCE, type StateChange, type StateChangeSink } from "../../shared/app/index.ts";

/** PutEvents takes at most 10 entries per call. */
export const MAX_PUT_EVENTS_ENTRIES = 10;

/** PutEvents accepted the call but refused some entries. */
export class PutEventsError extends Error {
  override readonly name = "PutEventsError";
}

/** The entry of one change on `busName`. */
export function eventEntry(change: StateChange, busName: string): PutEventsRequestEntry {
  return {
    EventBusName: busName,
    Source: STATE_CHANGE_SOURCE,
    DetailType: change.type,
    Detail: JSON.stringify(change.detail),
    Time: new Date(change.time),
  };
}

/**
 * The state-change sink on EventBridge: PutEvents, {@link MAX_PUT_EVENTS_ENTRIES} entries per call.
 * @throws PutEventsError naming the refused entries' codes (the runtime logs and counts it).
 */
export function eventBridgeStateChanges(opts: {
  client: EventBridgeClient;
  busName: string;
}): StateChangeSink {
  return {
    async publish(changes) {
      for (let i = 0; i < changes.length; i += MAX_PUT_EVENTS_ENTRIES) {
        const entries = changes.slice(i, i + MAX_PUT_EVENTS_ENTRIES).map((c) => eventEntry(c, opts.busName));
        const out = await opts.client.send(new PutEventsCommand({ Entries: entries }));
        if (out.FailedEntryCount) {
          const codes = (out.Entries ?? []).flatMap((e) => (e.ErrorCode ? [e.ErrorCode] : []));
          throw new PutEventsError(
            `PutEvents refused ${out.FailedEntryCount} of ${entries.length} entries: ${codes.join(", ")}`,
          );
        }
      }
    },
  };
}

/** The sink for `STATE_CHANGES_BUS`, or none when it is unset. */
export function stateChangesFor(
  config: { region: string; stateChangesBus?: string },
  opts: { endpoint?: string | undefined },
): StateChangeSink | undefined {
  if (!config.stateChangesBus) return undefined;
  const client = new EventBridgeClient({
    region: config.region,
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
  });
  return eventBridgeStateChanges({ client, busName: config.stateChangesBus });
}
