export {
  type ControllerSweep,
  runSweep,
  type SweepOptions,
  type SweepSummary,
} from "../shared/runtime/sweep-run.ts";
export type { SweepTask } from "../shared/runtime/sweep-task.ts";
