import {
  boundedStateChanges,
  type Context,
  STATE_CHANGE_VERSION,
  type StateChange,
  type StateChangeSink,
  StateChangeType,
} from "../runtime/index.ts";

/**
 * The state-change sink of one invocation: the platform's `sink` bounded to
 * `STATE_CHANGES_PER_INVOCATION` changes (see `boundedStateChanges`); undefined without a sink.
 */
export function invocationStateChanges(
  sink: StateChangeSink | undefined,
  max: number,
  ctx: Pick<Context, "log" | "metrics">,
): StateChangeSink | undefined {
  return sink && boundedStateChanges(sink, { max, log: ctx.log, metrics: ctx.metrics });
}

/** `Admission Gate Closed`, with what is missing. */
export function admissionGateClosed(problems: string[], at: Date): StateChange {
  return {
    type: StateChangeType.AdmissionGateClosed,
    time: at.toISOString(),
    detail: { version: STATE_CHANGE_VERSION, admission: { problems } },
  };
}
