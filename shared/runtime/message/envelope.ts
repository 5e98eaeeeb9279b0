import type { Job, JobMessage, Message, PassMessage } from "../core/index.ts";
import { hasBodies, hasSteeringReason, type MessageAuthenticator } from "./message-mac.ts";

/**
 * The version of the queued message's envelope this release writes and reads.
 *
 * - 1 (releases up to 0.1.0 wrote no version, the same shape): a job travelled as a pass-shaped
 *   message with a `shard` and a request named `__shard-…`;
 * - 2: a message is a {@link PassMessage} or a {@link JobMessage} (`kind: "job"`, its `job`);
 * - 3: a message names its `cluster` (one deployment reconciles many); its MAC covers it.
 *
 * This release reads all three; a version-1 job is read as the job it is, and a message of
 * version 1 or 2 as the default cluster's ({@link openEnvelope}).
 *
 * Caveats: raise it only when a message of the new shape would be misread by the release before;
 * that release then leaves it on the queue (retried with backoff, then the dead-letter queue)
 * instead of half-understanding it.
 */
export const ENVELOPE_VERSION = 3;

/**
 * What a delivered queue body is. A message is either a **pass** (one reconcile pass for one key)
 * or a **job** (a piece of the sweep's fanned-out work, e.g. probes, run by a controller's job
 * handler and never by the pass executor).
 */
export type Envelope =
  | { kind: "pass"; message: PassMessage }
  | { kind: "job"; message: JobMessage }
  /** Written by a newer release: not read here, retried until a release that reads it takes it. */
  | { kind: "newer"; version: number }
  /** Not a kubefn message at all: logged and dropped. */
  | { kind: "invalid" };

/**
 * Opens a queue body from any platform's queue, of this envelope version or an older one: a
 * version-1 job (a `shard` under a `__shard-…` request) is read as a {@link JobMessage} whose MACs
 * still verify (they never covered the name). A `snapshot` (a primary's body, which 0.1.0
 * attached) is dropped: no body stands in for a pass's read of its primary.
 *
 * @example
 * const envelope = openEnvelope(JSON.parse(body));
 * if (envelope.kind === "job") await runJob(ctx, registry, envelope.message);
 */
export function openEnvelope(body: unknown): Envelope {
  if (typeof body !== "object" || body === null) return { kind: "invalid" };
  const { v } = body as { v?: unknown };
  if (v !== undefined) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) return { kind: "invalid" };
    if (v > ENVELOPE_VERSION) return { kind: "newer", version: v };
  }
  // No release before version 2 wrote a `kind`: a job that says it is one is read as one.
  if ((body as { kind?: unknown }).kind === "job") {
    const message = body as JobMessage;
    const { cluster } = message as { cluster?: unknown };
    if (cluster !== undefined && (v === undefined || v < 3 || typeof cluster !== "string"))
      return { kind: "invalid" };
    return isJob(message.job) ? { kind: "job", message } : { kind: "invalid" };
  }
  if (v === undefined || v === 1) return openVersion1(body);
  const { cluster } = body as { cluster?: unknown };
  // Before version 3 no message named a cluster: one that does is read as no release wrote it.
  if (cluster !== undefined && (v < 3 || typeof cluster !== "string")) return { kind: "invalid" };
  if (!isMessage(body) || (body.kind !== undefined && body.kind !== "pass")) return { kind: "invalid" };
  return { kind: "pass", message: body };
}

/** The previous releases' message: a pass, or a job as a pass-shaped message with `shard`. */
function openVersion1(body: object): Envelope {
  if ((body as { cluster?: unknown }).cluster !== undefined) return { kind: "invalid" };
  if (!isMessage(body) || (body.kind !== undefined && body.kind !== "pass")) return { kind: "invalid" };
  const {
    snapshot: _snapshot,
    shard,
    ...rest
  } = body as PassMessage & {
    snapshot?: unknown;
    shard?: unknown;
  };
  if (shard === undefined) return { kind: "pass", message: rest };
  if (typeof shard !== "object" || shard === null) return { kind: "invalid" };
  const { task, objects, data, due } = shard as Partial<Job>;
  const { controller, name } = rest.request;
  const job = {
    controller,
    task,
    slot: name.startsWith(VERSION_1_JOB_PREFIX) ? name.slice(VERSION_1_JOB_PREFIX.length) : name,
    objects,
    ...(data === undefined ? {} : { data }),
    ...(due === undefined ? {} : { due }),
  };
  if (!isJob(job)) return { kind: "invalid" };
  const mac = rest.mac as unknown;
  return {
    kind: "job",
    message: {
      kind: "job",
      ...(rest.v === undefined ? {} : { v: rest.v }),
      ...(rest.traceparent === undefined ? {} : { traceparent: rest.traceparent }),
      job,
      // A version-1 job's MACs are a set, as now; a single string was never a job's: it fails.
      ...(mac === undefined ? {} : { mac: (Array.isArray(mac) ? mac : [mac]) as string[] }),
    },
  };
}

/** How version 1 named a job's request: `__shard-<slot>`, never an object's name. */
const VERSION_1_JOB_PREFIX = "__shard-";

function isJob(job: unknown): job is Job {
  if (typeof job !== "object" || job === null) return false;
  const { controller, task, slot, objects, due } = job as Partial<Job>;
  return (
    typeof controller === "string" &&
    typeof task === "string" &&
    typeof slot === "string" &&
    Array.isArray(objects) &&
    (due === undefined || typeof due === "number")
  );
}

/** Whether a queue body has the shape of a {@link PassMessage} (any version this release reads). */
export function isMessage(body: unknown): body is PassMessage {
  if (typeof body !== "object" || body === null) return false;
  const { request, attempt } = body as Partial<PassMessage>;
  return (
    typeof attempt === "number" &&
    typeof request === "object" &&
    request !== null &&
    typeof request.controller === "string" &&
    typeof request.name === "string" &&
    (request.namespace === undefined || typeof request.namespace === "string")
  );
}

/**
 * `message` as this release sends it: its envelope version and the trace it belongs to (its
 * cluster is the sending kubefn's, stamped as it goes out: `Core.outgoing`).
 */
export function sealed<M extends Message>(message: M, traceparent: string | undefined): M {
  return {
    ...message,
    v: ENVELOPE_VERSION,
    ...(traceparent && !message.traceparent ? { traceparent } : {}),
  };
}

/** What {@link authenticBodies} made of a delivered message. */
export type Authenticated =
  /** Its bodies verify (or it has none): it runs as sent. */
  | { kind: "authentic"; message: Message }
  /** A pass whose bodies do not verify, without them: it reads what it needs itself. */
  | { kind: "stripped"; message: PassMessage }
  /** A job whose objects do not verify: not run (the next sweep plans its work again). */
  | { kind: "refused" };

/**
 * Decides what a delivered message's bodies (`listed`, a job's objects) may do: only what
 * kubefn vouches for runs with them. `mac` absent means no body may travel (no key is set).
 *
 * Caveats: the Node host's in-process queue never leaves the process and does not ask (its
 * bodies come from its own sweep; intake's messages carry keys only).
 */
export async function authenticBodies(
  message: Message,
  mac: MessageAuthenticator | undefined,
): Promise<Authenticated> {
  if (!hasBodies(message)) return { kind: "authentic", message };
  if (mac && (await mac.verify(message))) return { kind: "authentic", message };
  if (message.kind === "job") return { kind: "refused" };
  return { kind: "stripped", message: withoutBodies(message) };
}

/**
 * A pass without the objects it carries (`listed`, `listedAt`), a follow-up's or an intake
 * event's reason (its trigger keeps its kind, for the pass's labels) and their `mac`.
 */
export function withoutBodies(message: PassMessage): PassMessage {
  const { listed: _listed, listedAt: _listedAt, mac: _mac, ...bare } = message;
  if (hasSteeringReason(bare)) return { ...bare, trigger: { kind: bare.trigger!.kind } };
  return bare;
}
