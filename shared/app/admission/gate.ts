import type { Kube } from "../../kube/index.ts";
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
  /** The last check, if any ran (the fleet page shows it). */
  state(): AdmissionState | undefined;
  /** How long a closed gate's work waits before it asks again. */
  readonly recheckSeconds: number;
}

export interface AdmissionGateOptions {
  kube: Pick<Kube, "list">;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  /** A check is reused for this long (ADMISSION_RECHECK_SECONDS). */
  recheckSeconds: number;
}

/**
 * A gate that checks the admission policies ({@link checkAdmissionPolicies}: two list requests) at
 * most once per `recheckSeconds` per process or isolate, whatever the number of passes; callers
 * during a check share it. Each check sets the gauge `kubefn_admission_policies_ready` (1 or 0)
 * and, while not ready, logs one warning naming what is missing; the first ready check after a
 * closed one logs that reconciling resumes.
 *
 * Caveats: there is no setting to switch it off. A cluster where kubefn's identity may not list
 * the policies (RBAC older than this release) stays closed: apply infra/rbac/kubefn.yaml.
 */
export function createAdmissionGate(opts: AdmissionGateOptions): AdmissionGate {
  let last: AdmissionState | undefined;
  let running: Promise<AdmissionState> | undefined;
  const check = async (): Promise<AdmissionState> => {
    const report = await checkAdmissionPolicies(opts.kube);
    const state = { report, checkedAt: opts.clock.now() };
    opts.metrics.gauge("kubefn_admission_policies_ready", report.ready ? 1 : 0);
    if (!report.ready) {
      opts.log.warn(
        "not reconciling: kubefn's admission policies are not installed and bound (its writes would not be contained); apply infra/rbac (kubefn install)",
        { missing: admissionProblems(report).join("; "), recheckSeconds: opts.recheckSeconds },
      );
    } else if (last && !last.report.ready) {
      opts.log.info("admission policies installed and bound: reconciling again", {});
    }
    last = state;
    return state;
  };
  const fresh = (s: AdmissionState) =>
    opts.clock.now().getTime() - s.checkedAt.getTime() < opts.recheckSeconds * 1000;
  return {
    recheckSeconds: opts.recheckSeconds,
    state: () => last,
    async open() {
      if (last && fresh(last)) return last.report.ready;
      running ??= check().finally(() => {
        running = undefined;
      });
      return (await running).report.ready;
    },
  };
}
