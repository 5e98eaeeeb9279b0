export { planSweep, sweepBucket } from "./sweep.ts";
export { createSweepLease, type SweepLease } from "./sweep-lease.ts";
export { type ControllerSweep, runSweep, type SweepOptions, type SweepSummary } from "./sweep-run.ts";
export { runSweepTask, type SweepTask } from "./sweep-task.ts";
