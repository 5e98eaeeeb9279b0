/**
 * The message MAC: kubefn's mark on the bodies a queued message carries, so that a body someone
 * else put on a platform queue (whoever holds `sqs:SendMessage`, a Queues producer binding) never
 * stands in for what kubefn listed.
 *
 * A message's bodies are the sweep's `listed` objects of a pass (with `listedAt`), a job's
 * objects, and a follow-up's reason (its `trigger`). A pass's `mac` is `v1.` + base64url(HMAC-SHA256(key, cluster, request, uid, trigger, listedAt,
 * listed)); the cluster is absent (not covered) only in messages of envelopes before version 3,
 * which are the default cluster's, so a body signed for one cluster never verifies for another. A job's is a set: one MAC of its frame (cluster, controller, task, data, due) and one per object
 * (the frame and that object), so that a job cut into several to fit a queue (SQS's
 * 256 KB) keeps every piece verifiable without the key: a piece verifies when its frame's and each
 * of its objects' MACs are in the set. The set also holds one MAC of the whole job (the frame and
 * every object in order, under a label of its own), so that a job delivered as it was signed —
 * every probe shard — is checked with one HMAC rather than one an object; a piece falls back to
 * the others, and a release that does not know the whole job's MAC passes over it. All over canonical JSON (keys sorted), so that a queue's
 * re-encoding keeps them valid. The
 * key is derived from `STATUS_SEAL_KEY` with a label of its own — a platform secret no channel
 * writer holds (not the audit token, not the relay secret, not kubefn's Kubernetes token) — and
 * only from a `STATUS_SEAL_KEY` that is set: the seal key derived from the intake's secrets when
 * it is unset is known to whoever holds those.
 *
 * What a message without a verifying MAC becomes is the consumer's rule (see `authenticBodies`
 * in envelope.ts): a pass loses its bodies and reads what it needs; a job is refused.
 *
 * Caveats: a MAC binds bodies to a message, not to a time: a message kubefn sent, replayed by
 * whoever can read and write the queue, verifies. Its `listedAt` (a pass uses listed objects for
 * 30 s) and a job's `due` are covered, so a replay carries kubefn's own old list, never an object
 * of the sender's choosing.
 */

import { hmacSha256 } from "../../auth/index.ts";
import { canonicalJson, type Job, type Message, type PassMessage } from "../core/index.ts";

/** Signs and verifies the bodies of queued messages with one key (see the module comment). */
export interface MessageAuthenticator {
  /** `message` with its `mac`; unchanged when it carries no bodies. */
  sign(message: Message): Promise<Message>;
  /** Whether `message`'s bodies carry a `mac` that verifies (true when it carries none). */
  verify(message: Message): Promise<boolean>;
}

const encoder = new TextEncoder();
const VERSION = "v1.";

/**
 * Whether `message` carries what someone must vouch for: a job, a pass's listed objects, or the
 * reason of a follow-up or of an intake event — which steers its pass (a SubPool's waiting look,
 * or its look for a StatefulSet's status write, reads 3 requests' worth and trusts the rest), so a
 * reason someone else put on the queue must not reach the pass.
 */
export function hasBodies(message: Message): boolean {
  return (
    message.kind === "job" ||
    (message.listed !== undefined && message.listed.length > 0) ||
    hasSteeringReason(message)
  );
}

/** A follow-up's or an intake event's reason (a drift reason travels with `listed`, under its MAC). */
export function hasSteeringReason(message: Message): boolean {
  if (message.kind === "job" || message.trigger?.reason === undefined) return false;
  const { kind } = message.trigger;
  return kind === "follow-up" || kind === "audit" || kind === "relay";
}

/**
 * A {@link MessageAuthenticator} keyed with `key`.
 *
 * @example
 * const mac = createMessageAuthenticator(key);
 * await queue.send([await mac.sign(message)]);
 * if (!(await mac.verify(delivered))) refuse(delivered);
 */
export function createMessageAuthenticator(key: string | Promise<string>): MessageAuthenticator {
  const imported = Promise.resolve(key).then((k) =>
    crypto.subtle.importKey("raw", encoder.encode(k), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
      "verify",
    ]),
  );
  const mac = async (label: string, content: unknown) =>
    VERSION +
    toBase64Url(
      new Uint8Array(
        await crypto.subtle.sign(
          "HMAC",
          await imported,
          encoder.encode(`${label}\n${canonicalJson(content)}`),
        ),
      ),
    );
  const passMac = (m: PassMessage) =>
    mac("kubefn-message-mac", {
      cluster: m.cluster,
      request: m.request,
      uid: m.uid,
      trigger: m.trigger,
      listedAt: m.listedAt,
      listed: m.listed,
    });
  // The frame never covers the job's slot (version 1's request name): a version-1 job read as a
  // job verifies as it was signed.
  const frameOf = (cluster: string | undefined, job: Job) => ({
    cluster,
    controller: job.controller,
    task: job.task,
    data: job.data,
    due: job.due,
  });
  const jobMacs = async (cluster: string | undefined, job: Job) => {
    const frame = frameOf(cluster, job);
    return {
      frame: await mac("kubefn-job-mac", { frame, object: null }),
      objects: await Promise.all(job.objects.map((object) => mac("kubefn-job-mac", { frame, object }))),
    };
  };
  const wholeJobMac = (cluster: string | undefined, job: Job) =>
    mac("kubefn-whole-job-mac", { frame: frameOf(cluster, job), objects: job.objects });
  return {
    async sign(message) {
      if (!hasBodies(message)) return message;
      if (message.kind === "job") {
        const { frame, objects } = await jobMacs(message.cluster, message.job);
        return { ...message, mac: [frame, ...objects, await wholeJobMac(message.cluster, message.job)] };
      }
      return { ...message, mac: await passMac(message) };
    },
    async verify(message) {
      if (!hasBodies(message)) return true;
      const carried: unknown = message.mac;
      if (message.kind === "job") {
        if (!Array.isArray(carried) || !carried.every((m) => typeof m === "string")) return false;
        const set = new Set(carried);
        if (set.has(await wholeJobMac(message.cluster, message.job))) return true;
        // A piece of a job cut after it was signed, or a job from a release before the whole MAC.
        const { frame, objects } = await jobMacs(message.cluster, message.job);
        return set.has(frame) && objects.every((m) => set.has(m));
      }
      return typeof carried === "string" && constantTimeEqual(carried, await passMac(message));
    },
  };
}

/** Compares two MACs without an early exit on the first differing character. */
function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * The message authenticator of a platform's settings: keyed from `STATUS_SEAL_KEY` when it is
 * set; none otherwise (bodies then never travel over a platform queue).
 */
export function messageAuthenticatorFrom(settings: {
  statusSealKey?: string;
}): MessageAuthenticator | undefined {
  if (!settings.statusSealKey) return undefined;
  const secret = settings.statusSealKey;
  return createMessageAuthenticator(
    hmacSha256(secret, "kubefn message mac key v1").then((bytes) => toBase64Url(bytes)),
  );
}

function toBase64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}
