import { ClientThrottledError } from "./errors.ts";
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

export type CircuitState = "closed" | "open" | "half-open";

export interface ApiGuardStats {
  state: CircuitState;
  /** Times the circuit opened. */
  opened: number;
  /** Requests held back because the circuit was open. */
  heldBack: number;
  /** Requests refused because an invocation had spent its budget. */
  overBudget: number;
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
 * Caveats: the circuit is a cache of "the server is failing", not state that must survive; a new
 * instance starts closed. Only answers count, not their meaning: a 404 or 409 is a healthy server.
 *
 * @example
 * const guard = createApiGuard(createNodeTransport(kc));
 * const kube = createKube(guard.invocation(200)); // one pass
 */
export function createApiGuard(
  inner: Transport,
  policy: CircuitPolicy = {},
  now: () => number = Date.now,
): ApiGuard {
  const threshold = policy.failureThreshold ?? DEFAULT_CIRCUIT.failureThreshold;
  const baseOpenMs = (policy.openSeconds ?? DEFAULT_CIRCUIT.openSeconds) * 1000;
  const maxOpenMs = (policy.maxOpenSeconds ?? DEFAULT_CIRCUIT.maxOpenSeconds) * 1000;
  let failuresInARow = 0;
  let openUntil = 0;
  let openMs = baseOpenMs;
  let trialInFlight = false;
  let isOpen = false;
  const stats = { opened: 0, heldBack: 0, overBudget: 0 };

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
    if (s === "half-open" && !trialInFlight) {
      trialInFlight = true;
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
    if (trial) trialInFlight = false;
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
    const retryAfterMs = retryAfterOf(res) * 1000;
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

  return {
    invocation(budget?: number): Transport {
      let left = budget ?? Number.POSITIVE_INFINITY;
      return {
        request(req) {
          if (left <= 0) {
            stats.overBudget++;
            return Promise.reject(
              new ClientThrottledError(
                `this invocation has sent its ${budget} requests (${req.method} ${req.path})`,
                { status: 0, reason: "RequestBudgetExhausted", request: `${req.method} ${req.path}` },
              ),
            );
          }
          left--;
          return send(req);
        },
      };
    },
    stats: () => ({ state: state(), ...stats }),
  };
}

function retryAfterOf(res: TransportResponse | undefined): number {
  const header = res?.headers.get("retry-after");
  const seconds = header ? Number(header) : Number.NaN;
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 600) : 0;
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
 * {@link createApiGuard} over `transport`, as the ports `createKubefn` takes.
 *
 * @example
 * const { kube, invocationKube } = guardedKube(createNodeTransport(kc), settings);
 * const kubefn = createKubefn(settings, { kube, invocationKube, queue, prober, log, metrics });
 */
export function guardedKube(
  transport: Transport,
  settings: { circuit?: CircuitPolicy; requestBudget?: number | undefined },
  fieldManager = "kubefn",
): GuardedKube {
  const guard = createApiGuard(transport, settings.circuit);
  return {
    guard,
    kube: createKube(guard.invocation(), { fieldManager }),
    invocationKube: () => createKube(guard.invocation(settings.requestBudget), { fieldManager }),
    apiFailing: () => guard.stats().state === "open",
  };
}
