export {
  defaultServiceAccountDir,
  type InClusterConnection,
  type InClusterOptions,
  inClusterConnection,
} from "./node-in-cluster.ts";
export { type TokenFileOptions, tokenFileSource } from "./node-token-file.ts";
export {
  createNodeTransport,
  guardedNodeKube,
  type LoadKubeConfigOptions,
  loadKubeConfig,
  type NodeTransportHttp,
  type NodeTransportOptions,
} from "./node-transport.ts";
