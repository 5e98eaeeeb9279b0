/**
 * The relay's process entry. Locally: `node --import tsx infra/relay/main.ts`; in the image, the
 * esbuild bundle of this file (see Dockerfile; Node's type stripping rejects the parameter
 * properties used in shared/). Reads its configuration from the environment once, with zod:
 *
 * | variable | meaning | default |
 * | --- | --- | --- |
 * | `KUBEFN_INTAKE_URL` | intake's `/v1/events` URL | required |
 * | `KUBEFN_RELAY_SECRET` | HMAC secret shared with intake | required |
 * | `KUBECONFIG` | kubeconfig file; without it, the pod's service account | in-cluster |
 * | `KUBEFN_SERVICE_ACCOUNT_DIR` | the ServiceAccount volume (token, ca.crt, namespace) in a Pod | /var/run/secrets/kubernetes.io/serviceaccount |
 * | `KUBEFN_RELAY_KINDS` | JSON list of `{group,version,resource,kind,namespaced,predicate}` | from the registry |
 * | `KUBEFN_RELAY_BATCH_SIZE` | most events per batch | 100 |
 * | `KUBEFN_RELAY_BATCH_INTERVAL_MS` | longest an event waits for its batch | 1000 |
 * | `KUBEFN_RELAY_BUFFER_SIZE` | most pending keys | 10000 |
 * | `KUBEFN_RELAY_PORT` | `/healthz` and `/metrics` | 8080 |
 * | `KUBEFN_TUNNEL_URL` | the Worker's `wss://…/v1/tunnel`: carry its API requests ([Cloudflare](../../docs/deploying/cloudflare.md)) | off |
 * | `KUBEFN_LOG_FORMAT` | `text` or `json` | json |
 * | `LOG_LEVEL` | least severe level logged: `debug`, `info`, `warn` or `error` | info |
 */
import { serve } from "@hono/node-server";
import * as z from "zod";
import { createLineLog } from "../../shared/app/telemetry/index.ts";
import { controllerKinds } from "../../shared/controllers/index.ts";
import { createKube, type Kube } from "../../shared/kube/index.ts";
import {
  createNodeTransport,
  defaultServiceAccountDir,
  inClusterConnection,
  loadKubeConfig,
} from "../../shared/kube/node.ts";
import { logLevels } from "../../shared/runtime/index.ts";
import { type RelayKind, relayKindFromConfig, relayKindSchema, relayKindsOfOperators } from "./kinds.ts";
import { createRelay } from "./relay.ts";
import { type ApiForward, apiForward, apiServerOf, startApiTunnel } from "./tunnel.ts";
import { clientNodeWatchStream, type WatchStream } from "./watch-stream.ts";

const envSchema = z.object({
  KUBEFN_INTAKE_URL: z.url(),
  KUBEFN_RELAY_SECRET: z.string().min(16, "KUBEFN_RELAY_SECRET must be at least 16 characters"),
  KUBECONFIG: z.string().min(1).optional(),
  /** Set by the kubelet in every Pod. */
  KUBERNETES_SERVICE_HOST: z.string().min(1).optional(),
  KUBERNETES_SERVICE_PORT: z.coerce.number().int().min(1).max(65_535).default(443),
  KUBEFN_SERVICE_ACCOUNT_DIR: z.string().min(1).default(defaultServiceAccountDir),
  KUBEFN_RELAY_KINDS: z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "KUBEFN_RELAY_KINDS is not JSON" });
        return z.NEVER;
      }
    })
    .pipe(z.array(relayKindSchema).min(1))
    .optional(),
  KUBEFN_RELAY_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(100),
  KUBEFN_RELAY_BATCH_INTERVAL_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
  KUBEFN_RELAY_BUFFER_SIZE: z.coerce.number().int().min(1).default(10_000),
  KUBEFN_RELAY_PORT: z.coerce.number().int().min(1).max(65_535).default(8080),
  KUBEFN_TUNNEL_URL: z
    .url({ protocol: /^wss?$/, error: "KUBEFN_TUNNEL_URL must be a ws(s):// URL" })
    .optional(),
  KUBEFN_LOG_FORMAT: z.enum(["text", "json"]).default("json"),
  LOG_LEVEL: z.enum(logLevels).default("info"),
});

export type RelayEnv = z.infer<typeof envSchema>;

/** Parses the relay's environment; throws with every problem listed. */
export function parseRelayEnv(env: Record<string, string | undefined>): RelayEnv {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) throw new Error(`invalid relay configuration:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/**
 * The kinds kubefn's controllers need, from the static list beside their CRDs: the relay never
 * reconciles, so it builds no operators to learn them.
 */
export function defaultRelayKinds(): RelayKind[] {
  return relayKindsOfOperators(controllerKinds());
}

/**
 * The relay's API access: `KUBECONFIG`'s cluster and identity, else the Pod's as its
 * ServiceAccount, with the token file re-read as the kubelet rotates it and once more after a 401
 * (`tokenFileSource`), for its lists and its watches alike.
 *
 * Caveats: client-node's own in-cluster loading caches the token for 60 s, so a revoked token
 * failed every request for up to a minute; it is not used.
 *
 * @throws when neither `KUBECONFIG` nor `KUBERNETES_SERVICE_HOST` is set, or the volume has no
 * `namespace` file.
 */
export function connectRelay(env: RelayEnv): { kube: Kube; stream: WatchStream; forward: ApiForward } {
  if (env.KUBECONFIG) {
    const kc = loadKubeConfig({ file: env.KUBECONFIG });
    const { server, ca } = apiServerOf(kc);
    return {
      kube: createKube(createNodeTransport(kc)),
      stream: clientNodeWatchStream(kc),
      forward: apiForward(server, ca),
    };
  }
  if (!env.KUBERNETES_SERVICE_HOST)
    throw new Error(
      "neither KUBECONFIG nor KUBERNETES_SERVICE_HOST is set: run the relay in a Pod or give it a kubeconfig",
    );
  const { kc, tokenSource } = inClusterConnection({
    host: env.KUBERNETES_SERVICE_HOST,
    port: env.KUBERNETES_SERVICE_PORT,
    serviceAccountDir: env.KUBEFN_SERVICE_ACCOUNT_DIR,
  });
  const { server, ca } = apiServerOf(kc);
  return {
    kube: createKube(createNodeTransport(kc, { tokenSource })),
    stream: clientNodeWatchStream(kc),
    forward: apiForward(server, ca),
  };
}

async function main(): Promise<void> {
  const env = parseRelayEnv(process.env);
  const log = createLineLog(env.KUBEFN_LOG_FORMAT, undefined, env.LOG_LEVEL);
  const { kube, stream, forward } = connectRelay(env);
  const kinds = env.KUBEFN_RELAY_KINDS?.map(relayKindFromConfig) ?? defaultRelayKinds();
  const relay = createRelay({
    kinds,
    kube,
    stream,
    intakeUrl: env.KUBEFN_INTAKE_URL,
    secret: env.KUBEFN_RELAY_SECRET,
    batch: { maxEvents: env.KUBEFN_RELAY_BATCH_SIZE, maxDelayMs: env.KUBEFN_RELAY_BATCH_INTERVAL_MS },
    bufferSize: env.KUBEFN_RELAY_BUFFER_SIZE,
    log,
  });
  const server = serve({ fetch: relay.app.fetch, port: env.KUBEFN_RELAY_PORT });
  relay.start();
  const tunnel = env.KUBEFN_TUNNEL_URL
    ? startApiTunnel({ url: env.KUBEFN_TUNNEL_URL, secret: env.KUBEFN_RELAY_SECRET, forward, log })
    : undefined;
  log.info("relay started", {
    kinds: kinds.map((k) => `${k.resource.resource}.${k.resource.group || "core"}:${k.predicate}`),
    intake: env.KUBEFN_INTAKE_URL,
    port: env.KUBEFN_RELAY_PORT,
  });
  const shutdown = async (signal: string) => {
    log.info("relay stopping", { signal });
    tunnel?.stop();
    await relay.stop();
    server.close();
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
