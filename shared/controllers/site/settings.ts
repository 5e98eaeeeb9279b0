/** The Site operator's settings: its components' `Config` and namespace (`SITE_*`). */
import { dnsLabel, ownNamespace } from "../../kube/index.ts";
import * as z from "../../zod/index.ts";
import type { OperatorSettingsDeclaration } from "../operator.ts";
import type { ComponentConfig } from "./watches.ts";

export const siteVariables = {
  SITE_IMAGE_REGISTRY: z._default(z.string().check(z.minLength(1)), "ghcr.io/unbounded-cloud"),
  SITE_IMAGE_TAG: z._default(z.string().check(z.minLength(1)), "latest"),
  SITE_APISERVER_ENDPOINT: z._default(
    z.url({ protocol: /^https?$/, error: "SITE_APISERVER_ENDPOINT must be an http(s) URL" }),
    "https://kubernetes.default.svc",
  ),
  /** Where Site components install; default: the namespace of kubefn's own ServiceAccount. */
  SITE_NAMESPACE: z.optional(z.string().check(z.regex(dnsLabel, "SITE_NAMESPACE must be a DNS label"))),
};

export interface SiteSettings {
  namespace: string;
  config: ComponentConfig;
}

/** The components' config when no settings were parsed (tests, benches). */
export const defaultSiteConfig: ComponentConfig = {
  imageRegistry: "ghcr.io/unbounded-cloud",
  imageTag: "latest",
  apiServerEndpoint: "https://kubernetes.default.svc",
};

export const siteSettings: OperatorSettingsDeclaration<typeof siteVariables, SiteSettings> = {
  variables: siteVariables,
  parse: (e, selfUsernames) => ({
    ok: true,
    settings: {
      namespace: e.SITE_NAMESPACE ?? ownNamespace(selfUsernames),
      config: {
        imageRegistry: e.SITE_IMAGE_REGISTRY,
        imageTag: e.SITE_IMAGE_TAG,
        apiServerEndpoint: e.SITE_APISERVER_ENDPOINT,
      },
    },
  }),
};
