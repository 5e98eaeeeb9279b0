import { ClientThrottledError, parseRetryAfter } from "./errors.ts";
import { createKube } from "./kube.ts";
import type { Kube, Transport, TransportRequest, TransportResponse } from "./port.ts";

/** Policy of the {@link createApiGuard} circuit, as data. */
export interface CircuitPolicy {
  /** Failures in a row (5xx, 429, no answer) that open the circuit. Default 5. */
  failureThreshold?: number;
  /** How long the circuit first stays open, in seconds. Default 5. */
  openSeconds?: number;
  /** Each re-open after a failed trial doubles the period, up to this. Default 60. */
  maxOpenSeconds?: number;
}

export const DEFAULT_CIRCUIT = { failureThreshold: 5, openSeconds: 5, maxOpenSeconds: 60 } as const;

/**
 * Retries of one request inside an invocation, as client-go's REST client does them: a 429 or a
 * 503 (the server did not process the request) on any verb, after its Retry-After; a 5xx or no
 * answer (reset, timeout) on a GET only (a write may have reached etcd: its pass reads again
 * instead). A Retry-After longer than `maxWaitSeconds` is not waited out here: the pass ends and
 * its follow-up waits instead. Every retry is a request: it spends the invocation's budget and
 * counts towards the circuit, which stops the retrying when it opens.
 */
export interface RetryPolicy {
  /** Retries per request after the first try. Default 0 (off) in createApiGuard; 2 in guardedKube. */
  maxRetries?: number;
  /** Longest wait before a retry, seconds. Default 2. */
  maxWaitSeconds?: number;
}

export type CircuitState = "closed" | "open" | "half-open";

export interface ApiGuardStats {
  state: CircuitState;
  /** Times the circuit opened. */
  opened: number;
  /** Requests held back because the circuit was open. */
  heldBack: number;
  /** Requests refused because an invocation had spent its budget. */
  overBudget: number;
  /** Requests sent again after a failure ({@link RetryPolicy}). */
  retried: number;
}

/**
 * The client side of back-pressure for one platform instance (a Node host, a Worker isolate, a
 * Lambda container): one circuit shared by every invocation, and a request budget per invocation
 * (a Workers queue batch or cron run, a Lambda event, a Node host pass or sweep).
 */
export interface ApiGuard {
  /**
   * A transport for one platform invocation (one pass or sweep on the Node host, one queue batch,
   * event or cron run on Workers and Lambda): it shares the instance's circuit and may send at most `budget`
   * requests (unbounded when unset); past it, requests fail with a `ClientThrottledError`
   * (reason RequestBudgetExhausted) without being sent.
   */
  invocation(budget?: number): Transport;
  stats(): ApiGuardStats;
}

/**
 * Wraps the instance's transport so that a struggling API server gets fewer requests from kubefn,
 * not more. After `failureThreshold` failures in a row (5xx, 429, network failure, timeout) the
 * circuit opens: every request fails at once with a `ClientThrottledError` (reason CircuitOpen,
 * `retryAfterSeconds` = time left), which `classifyError` makes a transient error, so each pass
 * ends early and its follow-up waits at least that long. The open period is the longer of the
 * policy's period and the server's last Retry-After. When it has passed, one trial request goes
 * through (half-open): an answer closes the circuit, a failure re-opens it for twice as long.
 *
 * With `maxRetries`, a request that failed in a way {@link RetryPolicy} allows is sent again
 * within the invocation, so one failed request need not end a pass of twenty: under a 20 % fault
 * rate a pass of 20 requests succeeds whole 1 time in 90 without retries.
 *
 * Caveats: the circuit is a cache of "the server is failing", not state that must survive; a new
 * instance starts closed. Only answers count, not their meaning: a 404 or 409 is a healthy server.
 *
 * @example
 * const guard = createApiGuard(createNodeTransport(kc));
 * const kube = createKube(guard.invocation(200)); // one pass
 */
export function createApiGuard(
  inner: Transport,
  policy: CircuitPolicy & RetryPolicy = {},
  now: () => number = Date.now,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): ApiGuard {
  const maxRetries = policy.maxRetries ?? 0;
  const maxWaitMs = (policy.maxWaitSeconds ?? 2) * 1000;
  const threshold = policy.failureThreshold ?? DEFAULT_CIRCUIT.failureThreshold;
  const baseOpenMs = (policy.openSeconds ?? DEFAULT_CIRCUIT.openSeconds) * 1000;
  const maxOpenMs = (policy.maxOpenSeconds ?? DEFAULT_CIRCUIT.maxOpenSeconds) * 1000;
  let failuresInARow = 0;
  let openUntil = 0;
  let openMs = baseOpenMs;
  /** When the half-open trial in flight was sent, if one is. */
  let trialSentAt: number | undefined;
  let isOpen = false;
  const stats = { opened: 0, heldBack: 0, overBudget: 0, retried: 0 };

  const state = (): CircuitState => (!isOpen ? "closed" : now() < openUntil ? "open" : "half-open");

  function open(retryAfterMs: number): void {
    if (isOpen && now() < openUntil) return;
    // A failed trial (half-open) doubles the period; a first opening starts at the base.
    if (isOpen) openMs = Math.min(maxOpenMs, openMs * 2);
    isOpen = true;
    stats.opened++;
    openUntil = now() + Math.max(openMs, retryAfterMs);
  }

  function admit(req: TransportRequest): { trial: boolean } {
    const s = state();
    if (s === "closed") return { trial: false };
    // A trial older than the longest open period is lost, not slow: a platform that cut its
    // invocation off mid-request (Workers, Lambda) never settles it, and one lost trial must not
    // hold the circuit half-open for the life of the instance.
    if (s === "half-open" && (trialSentAt === undefined || now() - trialSentAt >= maxOpenMs)) {
      trialSentAt = now();
      return { trial: true };
    }
    stats.heldBack++;
    const waitMs = Math.max(0, openUntil - now());
    throw new ClientThrottledError(
      `the API server keeps failing; request held back for ${Math.ceil(waitMs / 1000)} s (${req.method} ${req.path})`,
      {
        status: 0,
        reason: "CircuitOpen",
        request: `${req.method} ${req.path}`,
        retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
      },
    );
  }

  function record(res: TransportResponse | undefined, trial: boolean): void {
    if (trial) trialSentAt = undefined;
    const failed = res === undefined || res.status >= 500 || res.status === 429;
    if (!failed) {
      failuresInARow = 0;
      if (isOpen) {
        isOpen = false;
        openMs = baseOpenMs;
      }
      return;
    }
    failuresInARow++;
    const retryAfterMs = retryAfterOf(res, now()) * 1000;
    if (trial || failuresInARow >= threshold) open(retryAfterMs);
  }

  async function send(req: TransportRequest): Promise<TransportResponse> {
    const { trial } = admit(req);
    let res: TransportResponse | undefined;
    try {
      res = await inner.request(req);
      return res;
    } finally {
      record(res, trial);
    }
  }

  /** How long to wait before retry `retry` (1, 2, …) of `req`, or undefined: do not retry. */
  function retryDelayMs(
    req: TransportRequest,
    res: TransportResponse | undefined,
    retry: number,
  ): number | undefined {
    if (retry > maxRetries) return undefined;
    const notProcessed = res !== undefined && (res.status === 429 || res.status === 503);
    const failedRead = req.method === "GET" && (res === undefined || res.status >= 500);
    if (!notProcessed && !failedRead) return undefined;
    const retryAfterMs = retryAfterOf(res, now()) * 1000;
    if (retryAfterMs > maxWaitMs) return undefined;
    // 100 ms, 200 ms, …, jittered up to +50 %, or the server's Retry-After.
    return Math.max(retryAfterMs, 100 * 2 ** (retry - 1) * (1 + Math.random() / 2));
  }

  return {
    invocation(budget?: number): Transport {
      let left = budget ?? Number.POSITIVE_INFINITY;
      const spend = (req: TransportRequest) => {
        if (left <= 0) {
          stats.overBudget++;
          throw new ClientThrottledError(
            `this invocation has sent its ${budget} requests (${req.method} ${req.path})`,
            { status: 0, reason: "RequestBudgetExhausted", request: `${req.method} ${req.path}` },
          );
        }
        left--;
      };
      return {
        async request(req) {
          for (let retry = 1; ; retry++) {
            spend(req);
            let res: TransportResponse | undefined;
            let failure: unknown;
            try {
              res = await send(req);
            } catch (err) {
              // Held back by the circuit, or aborted by the caller: never retried.
              if (err instanceof ClientThrottledError || req.signal?.aborted) throw err;
              failure = err;
            }
            const delayMs = retryDelayMs(req, res, retry);
            if (delayMs === undefined || left <= 0) {
              if (res) return res;
              throw failure;
            }
            stats.retried++;
            await sleep(delayMs);
          }
        },
      };
    },
    stats: () => ({ state: state(), ...stats }),
  };
}

/** The server's Retry-After in seconds, at most 10 minutes; 0 without one. */
function retryAfterOf(res: TransportResponse | undefined, now: number): number {
  return Math.min(parseRetryAfter(res?.headers.get("retry-after") ?? null, now) ?? 0, 600);
}

/** The Kube ports a platform hands kubefn, with back-pressure in front of `transport`. */
export interface GuardedKube {
  /** For work outside an invocation's budget (the intake, the crawler API). */
  kube: Kube;
  /** A Kube for one invocation: `requestBudget` requests at most, the instance's circuit. */
  invocationKube(): Kube;
  /** True while the circuit is open (not while a trial request may go): hold fan-out back. */
  apiFailing(): boolean;
  guard: ApiGuard;
}

/**
 * {@link createApiGuard} over `transport`, as the ports `createKubefn` takes, retrying as
 * {@link RetryPolicy} says (2 retries unless `settings.retry` says otherwise).
 *
 * @example
 * const { kube, invocationKube } = guardedKube(createNodeTransport(kc), settings);
 * const kubefn = createKubefn(settings, { kube, invocationKube, queue, prober, log, metrics });
 */
export function guardedKube(
  transport: Transport,
  settings: { circuit?: CircuitPolicy; requestBudget?: number | undefined; retry?: RetryPolicy },
  fieldManager = "kubefn",
): GuardedKube {
  const guard = createApiGuard(transport, { maxRetries: 2, ...settings.circuit, ...settings.retry });
  return {
    guard,
    kube: createKube(guard.invocation(), { fieldManager }),
    invocationKube: () => createKube(guard.invocation(settings.requestBudget), { fieldManager }),
    apiFailing: () => guard.stats().state === "open",
  };
}
