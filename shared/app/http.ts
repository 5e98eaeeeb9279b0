import { Hono } from "hono/tiny";
import { fetchedKeys, GOOGLE_JWKS_URL, type PushTokenPolicy, staticKeys } from "../auth/index.ts";
import type { Context } from "../runtime/index.ts";
import {
  createIntakeApp,
  type IntakeBatch,
  type IntakeCredentials,
  mapWithRegistry,
} from "./intake/index.ts";
import { issuerRoutes } from "./issuer.ts";
import type { Operators } from "./operators.ts";
import type { OidcIssuerSettings, PubSubSettings } from "./settings.ts";

/** What the HTTP surface needs beyond the context: intake credentials and limits. */
export interface HttpSettings {
  auditToken?: string;
  relaySecret?: string;
  /** Credentials read per request (a platform that re-reads rotated secrets); the two above when unset. */
  credentials?: () => IntakeCredentials;
  /**
   * Pub/Sub push intake of GKE audit logs: the push subscription's token audience and service
   * account; keys inline (`jwks`) or fetched from `jwksUrl` (Google's by default).
   */
  pubsub?: PubSubSettings;
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Writes by these identities are dropped at intake. */
  selfUsernames: readonly string[];
  /** kubefn as its own OIDC issuer: its discovery document and JWKS are served ({@link issuerRoutes}). */
  oidcIssuer?: OidcIssuerSettings;
}

/**
 * The functions' HTTP surface, the same on every platform: the intake (`POST /v1/events`,
 * `GET /healthz`) plus the operators' own routes (the crawler API). Enqueues through `ctx.queue`,
 * or each intake batch through its own `batch()` (its log and queue) when given.
 *
 * @example
 * const app = createFunctionsApp(ctx, createOperators({ ... }), settings);
 * export default { fetch: app.fetch };
 */
export function createFunctionsApp(
  ctx: Context,
  operators: Operators,
  settings: HttpSettings,
  batch?: () => IntakeBatch,
): Hono {
  const app = new Hono();
  if (settings.oidcIssuer) app.route("/", issuerRoutes(settings.oidcIssuer));
  app.route(
    "/",
    createIntakeApp({
      ...(settings.auditToken ? { auditToken: settings.auditToken } : {}),
      ...(settings.relaySecret ? { relaySecret: settings.relaySecret } : {}),
      ...(settings.credentials ? { credentials: settings.credentials } : {}),
      ...(settings.pubsub ? { pubsub: { token: pushTokenPolicy(settings.pubsub, ctx) } } : {}),
      maxBodyBytes: settings.maxBodyBytes,
      replayWindowSeconds: settings.replayWindowSeconds,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, operators.registry, settings.selfUsernames),
      enqueue: (messages) => ctx.queue.send(messages),
      ...(batch ? { batch } : {}),
    }),
  );
  if (operators.routes) app.route("/", operators.routes(ctx));
  return app;
}

/** The OIDC policy of Pub/Sub push deliveries; the fetched keys are cached per instance. */
function pushTokenPolicy(pubsub: PubSubSettings, ctx: Context): PushTokenPolicy {
  return {
    audience: pubsub.audience,
    serviceAccountEmail: pubsub.serviceAccountEmail,
    keys: pubsub.jwks
      ? staticKeys(pubsub.jwks)
      : fetchedKeys({ url: pubsub.jwksUrl ?? GOOGLE_JWKS_URL, now: () => ctx.clock.now().getTime() / 1000 }),
  };
}
