import { sharedInFlight } from "../../concurrency/index.ts";
import { defaultRequestTimeoutMs, type Kube } from "../../kube/index.ts";
import type { Clock, Log, Metrics } from "../../runtime/index.ts";
import { type AdmissionReport, admissionProblems, checkAdmissionPolicies } from "./check.ts";

/** The last check and when it ran. */
export interface AdmissionState {
  report: AdmissionReport;
  checkedAt: Date;
}

/**
 * kubefn's refusal to reconcile without its containment: passes, jobs and sweeps ask
 * {@link AdmissionGate.open} first, and wait while it says no.
 */
export interface AdmissionGate {
  /** Whether the required admission policies are installed and bound, as last checked. */
  open(): Promise<boolean>;
  /** The check the gate's answer rests on, if any ran (the fleet page shows it). */
  state(): AdmissionState | undefined;
  /** How long a closed gate's work waits before it asks again (seconds). */
  waitSeconds(): number;
}

export interface AdmissionGateOptions {
  kube: Pick<Kube, "list">;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  /** A check is reused for this long (ADMISSION_RECHECK_SECONDS). */
  recheckSeconds: number;
  /**
   * Told when an answered check finds the gate closed and the answer before was open, or there
   * was none (a process's or isolate's first check): once per closing, never per waiting pass.
   */
  onClosed?: (problems: string[]) => void | Promise<void>;
}

/** How soon a check the API server did not answer is made again. */
export const UNANSWERED_RECHECK_SECONDS = 5;
/** An answer is kept through unanswered checks for at most this many re-check periods. */
export const KEPT_ANSWER_PERIODS = 5;
/**
 * A check in flight longer than this is lost, not slow, and the next caller checks again: two
 * list requests' deadlines and a little more. On Workers a check whose invocation was cut off
 * mid-list may never settle, and would otherwise hold every later pass of the isolate.
 */
export const CHECK_GIVEN_UP_SECONDS = (2 * defaultRequestTimeoutMs) / 1000 + 5;

/**
 * A gate that checks the admission policies ({@link checkAdmissionPolicies}: two list requests) at
 * most once per `recheckSeconds` per process or isolate, whatever the number of passes; callers
 * during a check share it. Each check sets the gauge `kubefn_admission_policies_ready` (1 or 0)
 * and, while not ready, logs one warning naming what is missing; the first ready check after a
 * closed one logs that reconciling resumes.
 *
 * A check the API server did not answer (5xx, 429, a timeout, the client's circuit open: see
 * {@link AdmissionReport.unanswered}) says nothing about the policies: the gate keeps the last
 * answer, if one came in the last {@link KEPT_ANSWER_PERIODS} periods, and asks again after
 * {@link UNANSWERED_RECHECK_SECONDS} instead of a whole period. Without such an answer it is
 * closed for those seconds. So a blip of the API server does not stop every pass and sweep for a
 * period; a pass let through meets the same API server and retries as any pass does.
 *
 * Caveats: there is no setting to switch it off. A cluster where kubefn's identity may not list
 * the policies (RBAC older than this release) stays closed, since a refusal is an answer: apply
 * infra/rbac/kubefn.yaml.
 */
export function createAdmissionGate(opts: AdmissionGateOptions): AdmissionGate {
  /** The last check the API server answered, and the last one it did not (if later). */
  let answered: AdmissionState | undefined;
  let unanswered: AdmissionState | undefined;
  const ageSeconds = (s: AdmissionState) => (opts.clock.now().getTime() - s.checkedAt.getTime()) / 1000;
  /** The answer the gate gives now: the last answered check, unless an unanswered one outdated it. */
  const current = (): AdmissionState | undefined => {
    if (!unanswered) return answered;
    if (answered && ageSeconds(answered) <= KEPT_ANSWER_PERIODS * opts.recheckSeconds) return answered;
    return unanswered;
  };
  const fresh = (): boolean => {
    if (unanswered) return ageSeconds(unanswered) < UNANSWERED_RECHECK_SECONDS;
    return answered !== undefined && ageSeconds(answered) < opts.recheckSeconds;
  };
  const waitSeconds = () => (current()?.report.unanswered ? UNANSWERED_RECHECK_SECONDS : opts.recheckSeconds);
  const check = async (): Promise<void> => {
    const before = current();
    const report = await checkAdmissionPolicies(opts.kube);
    const state = { report, checkedAt: opts.clock.now() };
    if (report.unanswered) unanswered = state;
    else [answered, unanswered] = [state, undefined];
    const now = current()!;
    opts.metrics.gauge("kubefn_admission_policies_ready", now.report.ready ? 1 : 0);
    if (report.unanswered && now !== state) {
      opts.log.warn(
        `the admission policies could not be checked: keeping the last answer (${now.report.ready ? "ready" : "not ready"}) for now`,
        {
          error: report.error,
          answeredSecondsAgo: Math.round(ageSeconds(now)),
          recheckSeconds: UNANSWERED_RECHECK_SECONDS,
        },
      );
    } else if (report.unanswered) {
      opts.log.warn(
        "not reconciling: the admission policies could not be checked (the API server did not answer)",
        {
          error: report.error,
          recheckSeconds: UNANSWERED_RECHECK_SECONDS,
        },
      );
    } else if (!report.ready) {
      opts.log.warn(
        "not reconciling: kubefn's admission policies are not installed and bound (its writes would not be contained); apply infra/rbac (kubefn install)",
        { missing: admissionProblems(report).join("; "), recheckSeconds: opts.recheckSeconds },
      );
      if (!before || before.report.ready) await opts.onClosed?.(admissionProblems(report));
    } else if (before && !before.report.ready) {
      opts.log.info("admission policies installed and bound: reconciling again", {});
    }
  };
  const checkShared = sharedInFlight(check, CHECK_GIVEN_UP_SECONDS * 1000, () => opts.clock.now().getTime());
  return {
    state: current,
    waitSeconds,
    async open() {
      if (!fresh()) await checkShared();
      return current()?.report.ready ?? false;
    },
  };
}
