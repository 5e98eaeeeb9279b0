/**
 * The Site CRD as `npm run gen:crds` writes it: the kind of api.ts plus what only the API server
 * and `kubectl` read (descriptions, CEL rules, printer columns). The runtime never imports this
 * module, so none of it is in the Worker bundle.
 */
import { type CrdSpec, conditionsNotes, documented } from "../../crd/index.ts";
import { SiteConditionType, siteKind } from "./api.ts";

const enabled = "Whether the component runs for this Site.";

export const siteCrd: CrdSpec = {
  ...siteKind,
  singular: "site",
  description: "Site is a location whose machines join the cluster; components reconcile per Site.",
  spec: documented(siteKind.spec, {
    components: "Per-Site components; an absent entry means enabled.",
    "components.metalman.enabled": enabled,
    "components.storage.enabled": enabled,
  }),
  status: documented(siteKind.status, conditionsNotes("conditions", Object.values(SiteConditionType))),
  validations: [
    {
      rule: "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
      message: "metadata.name must be a DNS label: it is used as the value of the site node label",
    },
    {
      // metalman's config for Site config-x is metalman-config-x: Site x's override ConfigMap, which
      // kubefn would overwrite (and delete with it). The name is the tenant's; kubefn's names are not.
      rule: "!self.metadata.name.startsWith('config-')",
      message:
        "metadata.name may not start with config-: metalman's config for it (metalman-<name>) would be the override ConfigMap of another Site",
    },
  ],
  printerColumns: [{ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" }],
};
