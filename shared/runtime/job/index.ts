export { type JobResult, runJob } from "./job.ts";
