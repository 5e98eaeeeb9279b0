/** How long the proxy controller waits before its next look, in seconds. */
export interface ProxyTimings {
  /** While an instance is on its way up. */
  provisioningPoll: number;
  /** While an instance is being deleted (replacement, cattle, finalizer). */
  deletionPoll: number;
  /** After a Running instance: the drift poll, also the controller's resync interval. */
  driftPoll: number;
  /** After the provider refused for quota. */
  quotaRetry: number;
  /** "Run again at once" after a step that changed what the next pass sees. */
  requeueNow: number;
}

export const defaultProxyTimings: ProxyTimings = {
  provisioningPoll: 5,
  deletionPoll: 5,
  driftPoll: 300,
  quotaRetry: 60,
  requeueNow: 0,
};
