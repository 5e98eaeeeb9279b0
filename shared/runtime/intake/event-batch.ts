import * as z from "../../zod/index.ts";

/**
 * The envelopes intake accepts, as zod schemas. Envelopes are checked strictly (a bad one is a
 * 4xx); the events inside are read tolerantly, one by one, so one malformed event is skipped and
 * counted instead of failing the batch.
 */

const objectMetaSchema = z.looseObject({
  name: z.string().check(z.minLength(1)),
  namespace: z.optional(z.string()),
  uid: z.optional(z.string()),
  generation: z.optional(z.number()),
  resourceVersion: z.optional(z.string()),
  ownerReferences: z.optional(
    z.array(
      z.looseObject({
        apiVersion: z.string(),
        kind: z.string(),
        name: z.string(),
        uid: z.string(),
        controller: z.optional(z.boolean()),
        blockOwnerDeletion: z.optional(z.boolean()),
      }),
    ),
  ),
});

/** `ObjectReference` of an audit event (audit.k8s.io/v1). */
export const auditObjectRefSchema = z.looseObject({
  resource: z.optional(z.string()),
  namespace: z.optional(z.string()),
  name: z.optional(z.string()),
  uid: z.optional(z.string()),
  apiGroup: z.optional(z.string()),
  apiVersion: z.optional(z.string()),
  resourceVersion: z.optional(z.string()),
  subresource: z.optional(z.string()),
});

/**
 * One audit `Event` (audit.k8s.io/v1), as the API server's webhook backend sends it. Documents the
 * shape; intake reads events with a hand-written reader that agrees with it (zod per event costs
 * more than the whole mapping, see test/bench/mapping.ts).
 */
export const auditEventSchema = z.looseObject({
  level: z.enum(["None", "Metadata", "Request", "RequestResponse"]),
  auditID: z.string(),
  stage: z.enum(["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"]),
  requestURI: z.string(),
  verb: z.string(),
  user: z.looseObject({ username: z.optional(z.string()), groups: z.optional(z.array(z.string())) }),
  impersonatedUser: z.optional(z.looseObject({ username: z.optional(z.string()) })),
  sourceIPs: z.optional(z.array(z.string())),
  userAgent: z.optional(z.string()),
  objectRef: z.optional(auditObjectRefSchema),
  responseStatus: z.optional(z.looseObject({ code: z.optional(z.number()), reason: z.optional(z.string()) })),
  requestObject: z.optional(z.unknown()),
  responseObject: z.optional(z.unknown()),
  requestReceivedTimestamp: z.string(),
  stageTimestamp: z.string(),
  annotations: z.optional(z.record(z.string(), z.string())),
});
export type AuditEvent = z.infer<typeof auditEventSchema>;

/** The audit webhook's batch envelope: `{ kind: "EventList", apiVersion: "audit.k8s.io/v1", items }`. */
export const auditEventListSchema = z.looseObject({
  kind: z.literal("EventList"),
  apiVersion: z.literal("audit.k8s.io/v1"),
  items: z.array(z.unknown()),
});

/** One relay event: a watch event of a kind the registry needs, after the relay's edge predicates. */
export const relayEventSchema = z.object({
  type: z.enum(["ADDED", "MODIFIED", "DELETED"]),
  resource: z.object({
    group: z.string(),
    version: z.string().check(z.minLength(1)),
    resource: z.string().check(z.minLength(1)),
  }),
  object: z.looseObject({
    apiVersion: z.optional(z.string()),
    kind: z.optional(z.string()),
    metadata: objectMetaSchema,
  }),
  /**
   * The relay saw only what the object's status says of readiness change (the `readiness`
   * predicate; issue 33): intake maps it as an owned object's status write. A hint, never a fact.
   */
  readinessOnly: z.optional(z.literal(true)),
});
export type RelayEvent = z.infer<typeof relayEventSchema>;

/** The relay's batch, posted signed to intake. */
export const relayBatchSchema = z.object({
  kind: z.literal("RelayBatch"),
  apiVersion: z.literal("kubefn.dev/v1"),
  events: z.array(relayEventSchema),
});
export type RelayBatch = z.infer<typeof relayBatchSchema>;

const relayEnvelopeSchema = z.object({
  kind: z.literal("RelayBatch"),
  apiVersion: z.literal("kubefn.dev/v1"),
  events: z.array(z.unknown()),
});

/** A batch whose envelope was checked; its events are not yet. */
export type EventBatch = { source: "audit"; items: unknown[] } | { source: "relay"; events: unknown[] };

/** The envelope is not an audit EventList nor a RelayBatch. Intake answers 400 with `message`. */
export class EventBatchError extends Error {
  override readonly name = "EventBatchError";
}

/**
 * Checks a decoded JSON body's envelope and says which sender's format it is.
 *
 * @throws EventBatchError with a message naming what is wrong.
 */
export function parseEventBatch(body: unknown): EventBatch {
  const kind = typeof body === "object" && body !== null ? (body as { kind?: unknown }).kind : undefined;
  if (kind === "EventList") {
    const parsed = auditEventListSchema.safeParse(body);
    if (!parsed.success)
      throw new EventBatchError(`malformed audit EventList: ${z.prettifyError(parsed.error)}`);
    return { source: "audit", items: parsed.data.items };
  }
  if (kind === "RelayBatch") {
    const parsed = relayEnvelopeSchema.safeParse(body);
    if (!parsed.success) throw new EventBatchError(`malformed RelayBatch: ${z.prettifyError(parsed.error)}`);
    return { source: "relay", events: parsed.data.events };
  }
  throw new EventBatchError(
    `expected kind EventList (audit.k8s.io/v1) or RelayBatch (kubefn.dev/v1), got ${JSON.stringify(kind ?? null)}`,
  );
}
