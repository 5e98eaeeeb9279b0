export {
  type ControllerSweep,
  runSweep,
  type SweepOptions,
  type SweepSummary,
  type SweepTask,
} from "../runtime/index.ts";
