export { type AgedInstance, defaultOrphanGraceSeconds, findOrphans } from "./find-orphans.ts";
export { type OrphanSweepOptions, orphanSweepTask } from "./sweep-task.ts";
