/**
 * The Site CRD as `npm run gen:crds` writes it: the kind of api.ts plus what only the API server
 * and `kubectl` read (descriptions, CEL rules, printer columns). The runtime never imports this
 * module, so none of it is in the Worker bundle.
 */
import { type CrdSpec, conditionsNotes, documented, kubefnCategory, withSummary } from "../../crd/index.ts";
import { SiteConditionType, siteKind } from "./api.ts";

const enabled = "Whether the component runs for this Site.";

export const siteCrd: CrdSpec = {
  ...siteKind,
  singular: "site",
  shortNames: ["st"],
  categories: [kubefnCategory],
  description: "Site is a location whose machines join the cluster; components reconcile per Site.",
  spec: documented(siteKind.spec, {
    "": "The Site and which of its per-Site components run.",
    displayName: "Human-readable name of the Site.",
    components: "Per-Site components; an absent entry means enabled.",
    "components.metalman": "metalman: the Site's bare-metal provisioning (a ConfigMap and a Deployment).",
    "components.metalman.enabled": enabled,
    "components.storage": "storage: the Site's storage configuration (a ConfigMap).",
    "components.storage.enabled": enabled,
  }),
  status: documented(siteKind.status, {
    "": "What kubefn observed, written by kubefn only.",
    observedGeneration: "The metadata.generation of the spec this status describes.",
    ...conditionsNotes("conditions", withSummary(Object.values(SiteConditionType))),
    seal: "kubefn's HMAC over this status (all but the probe bookkeeping), with a key its Kubernetes identity cannot read: a status whose seal does not verify was not written by kubefn, and a pass rewrites it.",
  }),
  validations: [
    {
      rule: "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
      message: "metadata.name must be a DNS label: it is used as the value of the site node label",
      fieldPath: ".metadata.name",
      reason: "FieldValueInvalid",
    },
    {
      // metalman's config for Site config-x is metalman-config-x: Site x's override ConfigMap, which
      // kubefn would overwrite (and delete with it). The name is the tenant's; kubefn's names are not.
      rule: "!self.metadata.name.startsWith('config-')",
      message:
        "metadata.name may not start with config-: metalman's config for it (metalman-<name>) would be the override ConfigMap of another Site",
      fieldPath: ".metadata.name",
      reason: "FieldValueInvalid",
    },
  ],
  printerColumns: [
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    {
      name: "Reason",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
      description: "Why the Site is (not) Ready",
      priority: 1,
    },
    ...Object.values(SiteConditionType).map((type) => ({
      name: type.replace(/Ready$/, ""),
      type: "string" as const,
      jsonPath: `.status.conditions[?(@.type=="${type}")].status`,
      description: `The ${type} condition's status`,
    })),
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
