export {
  type ControllerSweep,
  runSweep,
  type SweepOptions,
  type SweepSummary,
  type SweepTask,
} from "../shared/runtime/index.ts";
