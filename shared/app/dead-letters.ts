import { assertNever } from "../guards/index.ts";
import {
  createEventRecorder,
  isNamespaceName,
  isNotFound,
  isObjectName,
  type KubeObject,
} from "../kube/index.ts";
import { backoffSeconds, type Context, openEnvelope, type PassMessage } from "../runtime/index.ts";
import type { Core } from "./build.ts";
import type { Kubefn, Verdict } from "./ports.ts";

/** The reason of the Warning Event a dead-lettered pass leaves on its object. */
export const DEAD_LETTERED_REASON = "DeadLettered";

/** What a dead letter was, the `kind` label of `kubefn_dead_letters_total`. */
export type DeadLetterKind = "pass" | "job" | "newer" | "invalid";

/**
 * The core's `deadLetters`: each message the platform gave up on (Workers: `kubefn-dlq`) recorded
 * once — an error line, a `kubefn_dead_letters_total{controller,kind}` point, and for a pass a
 * Warning Event `DeadLettered` on its object, so that `kubectl describe` shows it.
 *
 * A dead letter is a message, not a fact: whoever can write to the queue can put anything there.
 * Only its key is read from it, and only a key that could name an object of a registered
 * controller (its controller registered, its namespace a namespace name where the kind is
 * namespaced and absent where it is not, its name an object name); the object is then read from
 * the API server, and the Event is about the object read (its kind, UID, resourceVersion) with
 * kubefn's own text. Nothing else of the body reaches a log line, a label or a write.
 *
 * Caveats: a pass's key whose object is gone is logged and acked. A read that fails for another
 * reason (the API server down) retries the dead letter with backoff, up to the dead-letter
 * queue's own retries.
 */
export function createDeadLetters(core: Core): Kubefn["deadLetters"] {
  return async (deliveries) => {
    const ctx = core.invocation();
    const verdicts: Verdict[] = [];
    // One at a time: dead letters are rare, and each may cost a read and a write.
    for (const delivery of deliveries)
      verdicts.push(await deadLetter(core, ctx, delivery.body, delivery.attempts ?? 1));
    return verdicts;
  };
}

async function deadLetter(core: Core, ctx: Context, body: unknown, attempts: number): Promise<Verdict> {
  const envelope = openEnvelope(body);
  const registry = core.ops.registry;
  const count = (kind: DeadLetterKind, controller: string | undefined) =>
    ctx.metrics.count("kubefn_dead_letters_total", {
      controller: controller !== undefined && registry.controller(controller) ? controller : "unknown",
      kind,
    });
  switch (envelope.kind) {
    case "invalid":
      // Its type only: even its keys are the writer's text.
      ctx.log.error("dead letter: not a kubefn message", {
        body: Array.isArray(body) ? "array" : body === null ? "null" : typeof body,
      });
      count("invalid", undefined);
      return { ack: true };
    case "newer":
      ctx.log.error("dead letter: a message of a newer release, which no consumer read", {
        version: envelope.version,
      });
      count("newer", undefined);
      return { ack: true };
    case "job": {
      const { controller, task } = envelope.message.job;
      const known = registry.controller(controller);
      const knownTask = known?.jobs && Object.hasOwn(known.jobs, task) ? task : undefined;
      ctx.log.error("dead letter: a job failed on every delivery; the next sweep plans its work again", {
        ...(known ? { controller } : {}),
        ...(knownTask ? { task: knownTask } : {}),
      });
      count("job", controller);
      return { ack: true };
    }
    case "pass":
      return deadPass(core, ctx, envelope.message, attempts);
    default:
      return assertNever(envelope);
  }
}

async function deadPass(core: Core, ctx: Context, message: PassMessage, attempts: number): Promise<Verdict> {
  const { controller, namespace, name } = message.request;
  const def = core.ops.registry.controller(controller);
  const validKey =
    def !== undefined &&
    isObjectName(name) &&
    (def.for.namespaced ? namespace !== undefined && isNamespaceName(namespace) : namespace === undefined);
  if (!def || !validKey) {
    ctx.log.error(
      "dead letter: a pass whose key names no object kubefn reconciles; nothing recorded on an object",
      {
        ...(def ? { controller } : {}),
      },
    );
    ctx.metrics.count("kubefn_dead_letters_total", {
      controller: def ? controller : "unknown",
      kind: "pass",
    });
    return { ack: true };
  }
  const request = { controller, ...(namespace === undefined ? {} : { namespace }), name };
  let object: KubeObject;
  try {
    object = await ctx.kube.get(def.for, namespace === undefined ? { name } : { namespace, name });
  } catch (err) {
    if (isNotFound(err)) {
      ctx.log.error("dead letter: a pass failed on every delivery; its object is gone", { request });
      ctx.metrics.count("kubefn_dead_letters_total", { controller, kind: "pass" });
      return { ack: true };
    }
    const retryAfterSeconds = backoffSeconds(attempts - 1, ctx.random);
    ctx.log.warn("dead letter: its object could not be read; retried", {
      request,
      attempts,
      retryAfterSeconds,
      error: String(err),
    });
    return { ack: false, retryAfterSeconds };
  }
  ctx.log.error("dead letter: a pass failed on every delivery; recorded on its object", {
    request,
    uid: object.metadata.uid,
  });
  ctx.metrics.count("kubefn_dead_letters_total", { controller, kind: "pass" });
  const events = createEventRecorder(ctx.kube, {
    controller: `kubefn.dev/${def.name}`,
    now: () => ctx.clock.now(),
    onError: (err) => {
      ctx.log.warn("event not recorded", { request, reason: DEAD_LETTERED_REASON, error: String(err) });
      ctx.metrics.count("kubefn_event_errors_total", { controller });
    },
  });
  await events.record(object, {
    type: "Warning",
    reason: DEAD_LETTERED_REASON,
    action: "Reconcile",
    note: `a reconcile message for this ${def.for.kind} failed on every delivery and was dead-lettered; the sweep revisits it at its next drift check (kubefn's pass lines with its key say why it failed)`,
  });
  return { ack: true };
}
