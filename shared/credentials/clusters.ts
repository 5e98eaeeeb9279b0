/**
 * The clusters one deployment reconciles (`KUBEFN_CLUSTERS`), each with its API endpoint, CA and
 * credential, and the intake credentials its events arrive with. Parsed once, at start, by zod;
 * no entry is today's single cluster from today's settings, named {@link DEFAULT_CLUSTER}.
 */
import { DEFAULT_CLUSTER } from "../runtime/index.ts";
import * as z from "../zod/index.ts";

export { DEFAULT_CLUSTER };

/** The clusters one deployment may declare: every series carries one, so the list is bounded. */
export const MAX_CLUSTERS = 100;

/** The ways kubefn proves itself to a cluster's API server. */
export const credentialKinds = ["token", "kubeconfig", "in-cluster", "google", "eks", "oidc-issuer"] as const;
export type CredentialKind = (typeof credentialKinds)[number];

/**
 * How kubefn authenticates to one cluster:
 *
 * - `token`: a fixed bearer (a ServiceAccount token), sent as it is;
 * - `kubeconfig`: a kubeconfig file (exec plugins and OIDC included), its context's cluster and user;
 * - `in-cluster`: the Pod's projected ServiceAccount token, re-read as the kubelet rotates it;
 * - `google`: a Google service account's access tokens (GKE), from its key JSON;
 * - `eks`: EKS tokens (`k8s-aws-v1.`, a presigned STS call) for `clusterName` in `region`;
 * - `oidc-issuer`: JWTs kubefn signs as its own OIDC issuer, with this cluster's `audience`, so a
 *   token minted for one cluster is refused by the next.
 */
export type Credential =
  | { kind: "token"; token: string }
  | { kind: "kubeconfig"; file: string; context?: string }
  | { kind: "in-cluster" }
  | { kind: "google"; key: string }
  | { kind: "eks"; clusterName: string; region: string }
  | { kind: "oidc-issuer"; audience: string };

/** One declared cluster. */
export interface ClusterDeclaration {
  /** A DNS label: the `cluster` of its messages, keys, log lines and metric series. */
  name: string;
  /** Its API server (https); a `kubeconfig` or `in-cluster` credential names its own. */
  server?: string;
  /** The PEM CA its API server's certificate chains to; the system's roots when unset. */
  ca?: string;
  credential: Credential;
  /** The bearer its audit webhook presents at intake; audit intake for it is off when unset. */
  auditToken?: string;
  /** The HMAC secret its relay signs batches with; relay intake for it is off when unset. */
  relaySecret?: string;
}

/** A plain-HTTP server on this machine (a development pass-through): no token crosses a network. */
const loopbackHttp = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$)/;

const nonEmpty = z.string().check(z.minLength(1));
const secret = z.string().check(z.minLength(16, "must be at least 16 characters"));

/** A {@link Credential}, checked (also for Cluster API discovery's management cluster). */
export const credentialSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("token"), token: nonEmpty }),
  z.strictObject({ kind: z.literal("kubeconfig"), file: nonEmpty, context: z.optional(nonEmpty) }),
  z.strictObject({ kind: z.literal("in-cluster") }),
  z.strictObject({ kind: z.literal("google"), key: nonEmpty }),
  z.strictObject({
    kind: z.literal("eks"),
    clusterName: z.string().check(z.regex(/^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/, "must be an EKS cluster name")),
    region: z.string().check(z.regex(/^[a-z]{2}(-[a-z]+)+-\d$/, "must be an AWS region")),
  }),
  z.strictObject({ kind: z.literal("oidc-issuer"), audience: nonEmpty }),
]);

/** A cluster's name: a DNS label, as every series's `cluster` label carries it. */
export const clusterNameSchema = z
  .string()
  .check(z.regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a DNS label (a-z, 0-9, -; at most 63)"));

const clusterSchema = z
  .strictObject({
    name: clusterNameSchema,
    server: z.optional(
      z.url({ protocol: /^https?$/, error: "must be an https URL" }).check(
        z.refine((url) => url.startsWith("https:") || loopbackHttp.test(url), {
          message: "must be an https URL (http only to a loopback address, for development)",
        }),
      ),
    ),
    ca: z.optional(
      z.string().check(z.includes("-----BEGIN CERTIFICATE-----", { error: "must be a PEM certificate" })),
    ),
    credential: credentialSchema,
    auditToken: z.optional(secret),
    relaySecret: z.optional(secret),
  })
  .check(
    z.refine(
      (c) =>
        c.server !== undefined || c.credential.kind === "kubeconfig" || c.credential.kind === "in-cluster",
      {
        message: "server is required unless the credential is a kubeconfig or in-cluster",
        path: ["server"],
      },
    ),
  );

/** The declared list: unique names, unique intake credentials (intake tells clusters apart by them). */
export const clustersSchema = z.array(clusterSchema).check(
  z.maxLength(MAX_CLUSTERS, `at most ${MAX_CLUSTERS} clusters`),
  z.refine((cs) => unique(cs.map((c) => c.name)), { message: "cluster names must be unique" }),
  z.refine((cs) => unique(cs.flatMap((c) => [c.auditToken, c.relaySecret].filter((s) => s !== undefined))), {
    message:
      "each cluster's auditToken and relaySecret must be its own (intake knows a batch's cluster by them)",
  }),
  z.refine((cs) => cs.filter((c) => c.credential.kind === "in-cluster").length <= 1, {
    message: "at most one cluster is the Pod's own (in-cluster)",
  }),
);

function unique(values: readonly string[]): boolean {
  return new Set(values).size === values.length;
}

/**
 * `KUBEFN_CLUSTERS` as a setting: a JSON list of {@link ClusterDeclaration}s. A platform with a
 * filesystem (the Node host) reads a file the variable names before it parses.
 */
export const clustersVariable = z.optional(z.jsonText(clustersSchema, "a JSON list of clusters"));

/**
 * The issues of `clusters` a platform cannot use, one a cluster: a credential kind not in `usable`.
 *
 * @example
 * unusableCredentials(clusters, ["token", "kubeconfig"]) // ["east: credential kind eks …"]
 */
export function unusableCredentials(
  clusters: readonly ClusterDeclaration[],
  usable: readonly CredentialKind[],
): string[] {
  return clusters
    .filter((c) => !usable.includes(c.credential.kind))
    .map(
      (c) =>
        `${c.name}: credential kind ${c.credential.kind} cannot be used on this platform (${usable.length ? `it uses ${usable.join(", ")}` : "it reconciles only the cluster of its own settings"})`,
    );
}
