/**
 * Where a transport gets the bearer token for its next request: a projected ServiceAccount token
 * file (the Node host in a Pod), and later an EKS token minted from the function's role, a Google
 * access token, or a JWT kubefn signs as its own OIDC issuer. The transport asks for a token per
 * request and tells the source when the API server refused one, so every kind renews itself the
 * same way and no person restarts anything.
 *
 * Caveats: `token()` is called once per API request; a source must answer from memory almost
 * always (a cheap check, then the cached token) and do its slow work (a file read, a signature,
 * a network round trip) only when its token is old or gone.
 *
 * @example
 * const transport = createNodeTransport(kc, { tokenSource: tokenFileSource("/var/run/secrets/kubernetes.io/serviceaccount/token") });
 */
export interface TokenSource {
  /** The token to send now. Rejects when the source has never had one. */
  token(): Promise<string>;
  /**
   * The API server answered 401 to `rejected`: a fresh token to send the request with once more,
   * or undefined when the source has nothing newer (the 401 then stands).
   */
  renew(rejected: string): Promise<string | undefined>;
}
