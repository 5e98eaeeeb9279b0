/**
 * The SubPool CRD as `npm run gen:crds` writes it: the kind of api.ts plus what only the API
 * server and `kubectl` read (descriptions, CEL rules, printer columns). The runtime never imports
 * this module, so none of it is in the Worker bundle.
 */
import { type CrdSpec, conditionsNotes, documented } from "../../crd/index.ts";
import { dnsLabel } from "../../kube/index.ts";
import { SubPoolConditionType, subPoolKind, subPoolNameMaxLength } from "./api.ts";

const resources = "CPU and memory requests are required.";

export const subPoolCrd: CrdSpec = {
  ...subPoolKind,
  singular: "subpool",
  shortNames: ["sp"],
  description:
    "SubPool is a relay pool; it derives the Namespace subpool-<name> and the workloads inside it.",
  spec: documented(subPoolKind.spec, {
    exposure: {
      cel: [
        {
          rule: "self.mode == 'Gateway' || (!has(self.hostname) && !has(self.gateway))",
          message: "exposure.hostname and exposure.gateway apply only to mode Gateway",
        },
      ],
    },
    "exposure.mode": "Internal: a ClusterIP Service only. Gateway: also an HTTPRoute.",
    "exposure.hostname": "Hostname of the HTTPRoute (Gateway mode).",
    "exposure.gateway": "Gateway the HTTPRoute attaches to; defaults to the operator's configured Gateway.",
    "storage.size": {
      description: "Size of the pool's PersistentVolumeClaim; immutable.",
      cel: [{ rule: "self == oldSelf", message: "storage.size is immutable" }],
    },
    "cpa.resources": resources,
    "cpaManager.resources": resources,
    suspend: "Scale workloads to zero and remove the route; Namespace, PVC and Secret are kept.",
  }),
  status: documented(subPoolKind.status, {
    namespace: "The derived Namespace.",
    cpaService: "The in-cluster Service of the pool, as host:port or name.",
    hostname: "The public hostname (Gateway mode).",
    ...conditionsNotes("conditions", Object.values(SubPoolConditionType)),
  }),
  validations: [
    {
      rule: `self.metadata.name.size() <= ${subPoolNameMaxLength}`,
      message: `metadata.name (the SubPool ID) must be at most ${subPoolNameMaxLength} characters`,
    },
    {
      rule: `self.metadata.name.matches('${dnsLabel.source}')`,
      message: "metadata.name (the SubPool ID) must be a DNS label: lowercase alphanumerics and '-'",
    },
  ],
  printerColumns: [
    { name: "Mode", type: "string", jsonPath: ".spec.exposure.mode" },
    { name: "Suspended", type: "boolean", jsonPath: ".spec.suspend" },
    { name: "Namespace", type: "string", jsonPath: ".status.namespace" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
