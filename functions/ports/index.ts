export { createNodeProber, type NodeProberOptions } from "./node-prober.ts";
