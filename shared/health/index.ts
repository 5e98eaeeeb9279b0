/**
 * Health probes and the threshold state machine. Platform probers are not exported here: the
 * Node and Lambda adapters import `shared/health/node-prober.ts` and the Workers adapter imports
 * `shared/health/socket-prober.ts` by path, so neither platform's sockets enter the other's bundle.
 */
export {
  decodeHealthState,
  encodeHealthState,
  HEALTH_ANNOTATION,
  HEALTH_STATUS_FIELD,
  healthStateOf,
  healthStatusPatch,
  storedHealthOf,
} from "./annotation.ts";
export { type AppliedHealthSweep, applyHealthSweep } from "./apply.ts";
export { mapWithConcurrency } from "./concurrency.ts";
export type { ProbeResult, Prober, ProbeTarget, ProxyEndpoint } from "./probe.ts";
export { screenProbeTarget } from "./probe.ts";
export type {
  HealthProjection,
  HealthReport,
  HealthSeed,
  HealthState,
  HealthThresholds,
  ProbeOutcome,
  RecordResult,
  ReportedHealth,
  ReportReason,
} from "./state.ts";
export { latencyChanged, projectHealth, recordProbe, recordRefusal } from "./state.ts";
export type {
  HealthSubject,
  HealthSweepResult,
  HealthSweepStats,
  ProbeAllOptions,
  SubjectOutcome,
} from "./sweep.ts";
export { probeAll, probeDue } from "./sweep.ts";
export type { IpAddress, RefusalReason, TargetPolicy, TargetVerdict } from "./target.ts";
export { checkAddress, checkProbeTarget, parseIpLiteral } from "./target.ts";
