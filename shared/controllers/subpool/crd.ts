/**
 * The SubPool CRD as `npm run gen:crds` writes it: the kind of api.ts plus what only the API
 * server and `kubectl` read (descriptions, CEL rules, printer columns). The runtime never imports
 * this module, so none of it is in the Worker bundle.
 */
import {
  type CrdSpec,
  conditionsNotes,
  documented,
  type FieldNote,
  kubefnCategory,
  withSummary,
} from "../../crd/index.ts";
import { dnsLabel } from "../../kube/index.ts";
import { SubPoolConditionType, subPoolKind, subPoolNameMaxLength } from "./api.ts";

/** Where a rule on the name reports (`metadata.name: Invalid value: …`, not `<nil>: …`). */
const nameField = { fieldPath: ".metadata.name", reason: "FieldValueInvalid" } as const;

const resources = "CPU and memory requests are required.";

/** Notes on a container's requests and limits; cpa + cpaManager requests must fit the operator's envelope. */
function resourceNotes(container: "cpa" | "cpaManager"): Record<string, FieldNote> {
  const at = `${container}.resources`;
  return {
    [`${at}.requests`]:
      "Requests of the container; cpa and cpaManager together must fit the operator's envelope (SUBPOOL_MAX_CPU, SUBPOOL_MAX_MEMORY).",
    [`${at}.requests.cpu`]: "CPU request, a quantity such as 500m.",
    [`${at}.requests.memory`]: "Memory request, a quantity such as 512Mi.",
    [`${at}.limits`]: "Limits of the container; none when unset.",
    [`${at}.limits.cpu`]: "CPU limit, a quantity.",
    [`${at}.limits.memory`]: "Memory limit, a quantity.",
  };
}

export const subPoolCrd: CrdSpec = {
  ...subPoolKind,
  singular: "subpool",
  shortNames: ["sp"],
  categories: [kubefnCategory],
  description:
    "SubPool is a relay pool; it derives the Namespace subpool-<name> and the workloads inside it.",
  spec: documented(subPoolKind.spec, {
    "": "The pool: how it is exposed, its storage and its two containers.",
    exposure: {
      description: "How the pool is reached: in the cluster only, or also through a Gateway.",
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
    "exposure.gateway.name": "Name of the Gateway.",
    "exposure.gateway.namespace": "Namespace of the Gateway.",
    storage: "The pool's PersistentVolumeClaim (kept while suspended, deleted with the Namespace).",
    "storage.storageClassName": "StorageClass of the claim; the cluster's default when unset.",
    "storage.size": {
      description: "Size of the pool's PersistentVolumeClaim; immutable.",
      cel: [{ rule: "self == oldSelf", message: "storage.size is immutable" }],
    },
    cpa: "The cpa container of the pool's StatefulSet.",
    "cpa.image": "Image reference of the cpa container.",
    "cpa.resources": resources,
    ...resourceNotes("cpa"),
    cpaManager: "The cpa-manager container of the pool's StatefulSet.",
    "cpaManager.image": "Image reference of the cpa-manager container.",
    "cpaManager.resources": resources,
    ...resourceNotes("cpaManager"),
    suspend: "Scale workloads to zero and remove the route; Namespace, PVC and Secret are kept.",
  }),
  status: documented(subPoolKind.status, {
    "": "What kubefn observed, written by kubefn only.",
    observedGeneration: "The metadata.generation of the spec this status describes.",
    namespace: "The derived Namespace.",
    cpaService: "The in-cluster Service of the pool, as host:port or name.",
    hostname: "The public hostname (Gateway mode).",
    ...conditionsNotes("conditions", withSummary(Object.values(SubPoolConditionType))),
    seal: "kubefn's HMAC over this status (all but the probe bookkeeping), with a key its Kubernetes identity cannot read: a status whose seal does not verify was not written by kubefn, and a pass rewrites it.",
  }),
  validations: [
    {
      rule: `self.metadata.name.size() <= ${subPoolNameMaxLength}`,
      message: `metadata.name (the SubPool ID) must be at most ${subPoolNameMaxLength} characters`,
      ...nameField,
    },
    {
      rule: `self.metadata.name.matches('${dnsLabel.source}')`,
      message: "metadata.name (the SubPool ID) must be a DNS label: lowercase alphanumerics and '-'",
      ...nameField,
    },
  ],
  printerColumns: [
    { name: "Mode", type: "string", jsonPath: ".spec.exposure.mode" },
    { name: "Suspended", type: "boolean", jsonPath: ".spec.suspend" },
    { name: "Namespace", type: "string", jsonPath: ".status.namespace" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    {
      name: "Reason",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
      description: "Why the pool is (not) Ready",
      priority: 1,
    },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
