export {
  createNodeTransport,
  type LoadKubeConfigOptions,
  loadKubeConfig,
  type NodeTransportOptions,
} from "./node-transport.ts";
