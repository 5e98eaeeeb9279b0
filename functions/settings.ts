import { z } from "zod";
import type { RsaJwk } from "../shared/auth/index.ts";
import type { HttpSettings } from "./http.ts";

/** A comma-separated list, trimmed, empties dropped. */
export const commaList = z.string().transform((s) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);

/** An optional shared secret or token: at least 16 characters when set. */
export const secretVariable = (name: string) =>
  z.string().min(16, `${name} must be at least 16 characters`).optional();

/** The Pub/Sub push intake's variables (the Node host prefixes them with KUBEFN_). */
export const pubsubVariable = {
  audience: z.string().min(1).optional(),
  serviceAccount: (name: string) => z.email(`${name} must be a service account email`).optional(),
  jwksUrl: (name: string) =>
    z.url({ protocol: /^https?$/, error: `${name} must be an http(s) URL` }).optional(),
  jwks: (name: string) =>
    z
      .string()
      .transform((s, ctx) => {
        try {
          const v = JSON.parse(s) as { keys?: unknown };
          if (Array.isArray(v.keys)) return v as { keys: RsaJwk[] };
        } catch {}
        ctx.addIssue({ code: "custom", message: `${name} must be a JWKS: {"keys":[…]}` });
        return z.NEVER;
      })
      .optional(),
};

/**
 * The variables every serverless platform reads the same way: intake credentials and limits,
 * the crawler API token, the sweep period and the proxy resync. Spread into a platform's schema.
 */
export const functionVariables = {
  AUDIT_TOKEN: secretVariable("AUDIT_TOKEN"),
  RELAY_SECRET: secretVariable("RELAY_SECRET"),
  API_TOKEN: secretVariable("API_TOKEN"),
  SELF_USERNAMES: commaList.default(["system:serviceaccount:kubefn-system:kubefn"]),
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024),
  REPLAY_WINDOW_SECONDS: z.coerce.number().int().min(10).default(300),
  PUBSUB_AUDIENCE: pubsubVariable.audience,
  PUBSUB_SERVICE_ACCOUNT: pubsubVariable.serviceAccount("PUBSUB_SERVICE_ACCOUNT"),
  PUBSUB_JWKS_URL: pubsubVariable.jwksUrl("PUBSUB_JWKS_URL"),
  PUBSUB_JWKS: pubsubVariable.jwks("PUBSUB_JWKS"),
  SWEEP_PERIOD_SECONDS: z.coerce.number().int().min(60).max(3600).default(60),
  PROXY_RESYNC_SECONDS: z.coerce.number().int().min(60).optional(),
};

type FunctionVariables = z.infer<z.ZodObject<typeof functionVariables>>;

/** Pub/Sub push intake is on when both its audience and service account are set. */
export function pubsubSettingsFrom(v: {
  audience?: string | undefined;
  serviceAccount?: string | undefined;
  jwks?: { keys: RsaJwk[] } | undefined;
  jwksUrl?: string | undefined;
}): Pick<HttpSettings, "pubsub"> {
  if (!v.audience || !v.serviceAccount) return {};
  return {
    pubsub: {
      audience: v.audience,
      serviceAccountEmail: v.serviceAccount,
      ...(v.jwks ? { jwks: v.jwks } : {}),
      ...(v.jwksUrl ? { jwksUrl: v.jwksUrl } : {}),
    },
  };
}

/** The settings {@link functionVariables} give, in the shape the adapters pass on. */
export interface FunctionSettings extends HttpSettings {
  /** Bearer token of the crawler API (/v1/proxies, /v1/leases); off when unset. */
  apiToken?: string;
  selfUsernames: string[];
  /** Must match the platform's sweep schedule. */
  sweepPeriodSeconds: number;
  proxyResyncSeconds?: number;
}

export function functionSettingsFrom(e: FunctionVariables): FunctionSettings {
  return {
    ...(e.AUDIT_TOKEN ? { auditToken: e.AUDIT_TOKEN } : {}),
    ...(e.RELAY_SECRET ? { relaySecret: e.RELAY_SECRET } : {}),
    ...(e.API_TOKEN ? { apiToken: e.API_TOKEN } : {}),
    selfUsernames: e.SELF_USERNAMES,
    maxBodyBytes: e.MAX_BODY_BYTES,
    replayWindowSeconds: e.REPLAY_WINDOW_SECONDS,
    ...pubsubSettingsFrom({
      audience: e.PUBSUB_AUDIENCE,
      serviceAccount: e.PUBSUB_SERVICE_ACCOUNT,
      jwks: e.PUBSUB_JWKS,
      jwksUrl: e.PUBSUB_JWKS_URL,
    }),
    sweepPeriodSeconds: e.SWEEP_PERIOD_SECONDS,
    ...(e.PROXY_RESYNC_SECONDS ? { proxyResyncSeconds: e.PROXY_RESYNC_SECONDS } : {}),
  };
}

/** One line per bad variable, for a configuration error's message. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n");
}
