export {
  createNodeTransport,
  guardedNodeKube,
  type LoadKubeConfigOptions,
  loadKubeConfig,
  type NodeTransportOptions,
} from "./node-transport.ts";
