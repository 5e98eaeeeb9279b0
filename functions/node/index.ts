export { type NodeHostConfig, parseNodeHostEnv } from "./config.ts";
export {
  type Devcluster,
  type DevclusterInfo,
  type DevclusterOptions,
  startDevcluster,
} from "./dev/index.ts";
export { type NodeHost, startNodeHost } from "./host.ts";
export {
  allowForKubefn,
  asServiceAccount,
  installCrdsAndRbac,
  manifestsIn,
  serviceAccountToken,
  trustAsKubefn,
} from "./install.ts";
export { WorkQueue, type WorkQueueOptions } from "./work-queue.ts";
