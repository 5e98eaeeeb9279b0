export {
  bearerAuth,
  boundHolder,
  type CrawlerCredential,
  clusterNamespaceToken,
  crawlerOf,
  credentialOf,
  mayUseCluster,
  mayUseNamespace,
  namespaceToken,
  parseCrawlerCredentials,
  tokensEqual,
} from "../../../auth/index.ts";
export { apiErrorHandler } from "./api-errors.ts";
export {
  type CrawlerReads,
  listProxies,
  listProxiesInScope,
  parseProxies,
  servedStatus,
} from "./list-proxies.ts";
export {
  defaultListingSeconds,
  freshProxyListing,
  type ProxyListing,
  sharedProxyListing,
} from "./listing.ts";
export { countByPhase, proxyPhaseGaugeTask, unknownPhaseLabel } from "./phase-gauge.ts";
export {
  defaultManagedPort,
  defaultManagedScheme,
  isProxyReady,
  type ProxyEndpoint,
  proxyEndpoint,
  type ReadyFilter,
  type ReadyProxy,
  selectReady,
} from "./ready.ts";
export {
  badNamespace,
  badRequest,
  discoveryRoutes,
  forbiddenNamespace,
  type ProxyApiOptions,
} from "./routes.ts";
