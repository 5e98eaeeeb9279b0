/**
 * `KUBEFN_CLUSTER_API`: where the Node host discovers clusters from Cluster API `Cluster` objects,
 * and as whom (see cluster-api.ts). Apart from discovery itself, so that the host's settings
 * (config.ts) need nothing of the host's cluster code.
 */
import {
  type ClusterDeclaration,
  clusterNameSchema,
  credentialSchema,
  MAX_CLUSTERS,
} from "../../shared/credentials/index.ts";
import * as z from "../../shared/zod/index.ts";

/** Where discovery reads Cluster objects, and as whom (`KUBEFN_CLUSTER_API`). */
export interface ClusterApiSettings {
  /** The management cluster's API server (https); a `kubeconfig` or `in-cluster` credential names its own. */
  server?: string;
  ca?: string;
  credential: ClusterDeclaration["credential"];
  /** The namespaces whose `Cluster` objects join the fleet (each watched on its own: a Role each). */
  namespaces: string[];
  /** How often every `Cluster` and its Secrets are read again besides the watch (rotated kubeconfigs). */
  resyncSeconds: number;
}

const clusterApiSchema = z
  .strictObject({
    server: z.optional(z.url({ protocol: /^https$/, error: "must be an https URL" })),
    ca: z.optional(
      z.string().check(z.includes("-----BEGIN CERTIFICATE-----", { error: "must be a PEM certificate" })),
    ),
    credential: credentialSchema,
    namespaces: z.array(clusterNameSchema).check(
      z.minLength(1, "name at least one namespace"),
      z.maxLength(MAX_CLUSTERS, `at most ${MAX_CLUSTERS} namespaces`),
      z.refine((ns) => new Set(ns).size === ns.length, { message: "namespaces must be unique" }),
    ),
    resyncSeconds: z._default(z.number().check(z.int(), z.gte(10), z.lte(3600)), 300),
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
    z.refine((c) => c.credential.kind !== "google" && c.credential.kind !== "eks", {
      message: "the Node host reaches a management cluster by token, kubeconfig, in-cluster or oidc-issuer",
      path: ["credential", "kind"],
    }),
  );

/** `KUBEFN_CLUSTER_API` as a setting: a JSON object ({@link ClusterApiSettings}). */
export const clusterApiVariable = z.optional(z.jsonText(clusterApiSchema, "a JSON object"));
