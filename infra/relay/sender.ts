import { signBatch } from "../../shared/auth/index.ts";
import type { Log, Metrics, RelayBatch, RelayEvent } from "../../shared/runtime/index.ts";

/** What intake's answer means for the batch. */
export type Verdict = "delivered" | "retry" | "rejected" | "tooLarge";

/** Statuses worth another try besides every 5xx: intake or something before it is busy. */
export const retryStatusCodes: ReadonlySet<number> = new Set([408, 425, 429]);

/** Classifies intake's HTTP status; the only place that does. */
export function verdictFor(status: number): Verdict {
  if (status >= 200 && status < 300) return "delivered";
  // Intake already accepted this very batch (its signature): an earlier attempt got through.
  if (status === 409) return "delivered";
  if (status === 413) return "tooLarge";
  if (status >= 500 || retryStatusCodes.has(status)) return "retry";
  return "rejected";
}

export interface Backoff {
  baseMs: number;
  maxMs: number;
}

export const defaultBackoff: Backoff = { baseMs: 500, maxMs: 30_000 };

/**
 * Delay before retry number `attempt` (1 = the first retry): exponential, capped, with "equal
 * jitter" (half fixed, half random), so relays that lost intake together do not return together.
 */
export function backoffDelay(attempt: number, random: number, backoff: Backoff = defaultBackoff): number {
  const ceiling = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}

/** `Retry-After` in ms when it is a number of seconds, else undefined. HTTP dates are ignored. */
export function retryAfterMs(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim()) * 1000;
}

export type SendResult =
  | { outcome: "delivered"; attempts: number }
  | { outcome: "rejected"; attempts: number; status: number; message: string }
  | { outcome: "tooLarge"; attempts: number }
  | { outcome: "aborted"; attempts: number };

export interface SenderOptions {
  /** Intake's endpoint, e.g. `https://intake.example/v1/events`. */
  url: string;
  /** The shared HMAC secret intake verifies with. */
  secret: string;
  log: Log;
  metrics: Metrics;
  backoff?: Backoff;
  /** Per-request deadline, default 10 s. */
  timeoutMs?: number;
  /** Give up after this many attempts; default: never (retry while intake is down). */
  maxAttempts?: number;
  /** Aborts the current attempt or wait; the send resolves `aborted`. */
  signal?: AbortSignal;
  fetch?: typeof fetch;
  nowSeconds?: () => number;
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Builds the RelayBatch document for `events`. */
export function relayBatch(events: RelayEvent[]): RelayBatch {
  return { kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events };
}

/**
 * Posts relay batches to intake, signed (a fresh timestamp per attempt, so a long outage never
 * makes a batch stale), retrying network errors, timeouts, 5xx and 408/425/429 with exponential
 * backoff and jitter, honouring `Retry-After` up to the backoff cap.
 *
 * Counts `kubefn_relay_send_attempts_total{result}` and `kubefn_relay_batches_total{outcome}`.
 *
 * Caveats: another 4xx is not retried: intake refused the batch as such (bad signature: a secret
 * mismatch; 400: a relay bug), and retrying would block the pipe forever. It is counted and
 * logged at error level, and the batch is dropped; the sweep covers its events. A 413 is returned
 * as `tooLarge` so that the caller can split the batch.
 *
 * @example
 * const send = createSender({ url, secret, log, metrics });
 * const result = await send([{ type: "ADDED", resource, object }]);
 */
export function createSender(opts: SenderOptions): (events: RelayEvent[]) => Promise<SendResult> {
  const doFetch = opts.fetch ?? fetch;
  const nowSeconds = opts.nowSeconds ?? (() => Date.now() / 1000);
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? abortableSleep;
  const backoff = opts.backoff ?? defaultBackoff;
  const maxAttempts = opts.maxAttempts ?? Number.POSITIVE_INFINITY;

  return async (events) => {
    const body = JSON.stringify(relayBatch(events));
    let attempts = 0;
    for (;;) {
      if (opts.signal?.aborted) return finish({ outcome: "aborted", attempts });
      attempts++;
      let wait: number | undefined;
      let failure: string;
      try {
        const headers = await signBatch(opts.secret, body, nowSeconds());
        const signals = [AbortSignal.timeout(opts.timeoutMs ?? 10_000)];
        if (opts.signal) signals.push(opts.signal);
        const res = await doFetch(opts.url, {
          method: "POST",
          // The signed batch goes to the configured intake only, never where a redirect points.
          redirect: "manual",
          headers: { ...headers, "content-type": "application/json" },
          body,
          signal: AbortSignal.any(signals),
        });
        const text = await res.text().catch(() => "");
        const verdict = verdictFor(res.status);
        opts.metrics.count("kubefn_relay_send_attempts_total", { result: String(res.status) });
        if (verdict === "delivered") return finish({ outcome: "delivered", attempts });
        if (verdict === "tooLarge") return finish({ outcome: "tooLarge", attempts });
        if (verdict === "rejected") {
          const message = text.slice(0, 500);
          opts.log.error("intake rejected a relay batch; dropped", {
            status: res.status,
            events: events.length,
            message,
          });
          return finish({ outcome: "rejected", attempts, status: res.status, message });
        }
        wait = retryAfterMs(res.headers.get("retry-after"));
        failure = `HTTP ${res.status}`;
      } catch (err) {
        if (opts.signal?.aborted) return finish({ outcome: "aborted", attempts });
        opts.metrics.count("kubefn_relay_send_attempts_total", { result: "network" });
        failure = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      }
      if (attempts >= maxAttempts) {
        opts.log.error("intake unreachable; batch dropped after max attempts", { attempts, failure });
        return finish({ outcome: "rejected", attempts, status: 0, message: failure });
      }
      const delay = Math.min(backoff.maxMs, Math.max(wait ?? 0, backoffDelay(attempts, random(), backoff)));
      opts.log.warn("intake not accepting; retrying", { attempt: attempts, failure, delayMs: delay });
      await sleep(delay, opts.signal).catch(() => {});
    }
  };

  function finish(result: SendResult): SendResult {
    opts.metrics.count("kubefn_relay_batches_total", { outcome: result.outcome });
    return result;
  }
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
