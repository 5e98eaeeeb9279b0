/**
 * Health probes and the threshold state machine. Platform probers are not exported here: the
 * Node and Lambda adapters import `shared/health/node-prober.ts` (Node sockets, a Node-only file)
 * and the Workers adapter imports `shared/health/socket-prober.ts` (its `connect` is a parameter)
 * by path, so neither platform's sockets enter the other's bundle.
 */

export { mapWithConcurrency } from "../concurrency/index.ts";
export { type AppliedHealthSweep, applyHealthSweep } from "./apply.ts";
export type { ProbeResult, Prober, ProbeTarget, ProxyEndpoint } from "./probe.ts";
export { describeError, screenProbeTarget } from "./probe.ts";
export {
  boundedProber,
  type PlanProbeShardsOptions,
  type ProbeShard,
  type ProbeShardPlanner,
  planProbeShards,
  probeDelays,
  probeShardPlanner,
} from "./shards.ts";
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
export {
  decodeHealthState,
  encodeHealthState,
  HEALTH_ANNOTATION,
  HEALTH_STATUS_FIELD,
  healthStateOf,
  healthStatusPatch,
  storedHealthOf,
} from "./stored-state.ts";
export type {
  HealthSubject,
  HealthSweepResult,
  HealthSweepStats,
  ProbeAllOptions,
  ProbeResume,
  SubjectOutcome,
} from "./sweep.ts";
export { defaultConfirmDelayMs, probeAll, probeDue, spreadGroupSize } from "./sweep.ts";
export type {
  Cidr,
  IpAddress,
  ProbeAllowList,
  RefusalReason,
  TargetPolicy,
  TargetVerdict,
} from "./target.ts";
export {
  checkAddress,
  checkProbeTarget,
  emptyProbeAllowList,
  parseIpLiteral,
  parseProbeAllowList,
} from "./target.ts";
