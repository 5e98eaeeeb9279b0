import { Resources } from "../../kube/index.ts";
import type { SweepTask } from "../../runtime/index.ts";
import { defineOperator } from "../operator.ts";
import { subPoolResource } from "./api.ts";
import { defaultOperatorConfig, type InvalidOperatorConfig, type OperatorConfig } from "./config.ts";
import { subPoolController, subPoolControllerName } from "./controller.ts";
import { subPoolOwnedResources } from "./desired.ts";
import { subPoolObjectsRole } from "./grant.ts";
import { subPoolSettings } from "./settings.ts";
import { sharedLookSweepTask } from "./shared-look.ts";
import { defaultSubPoolTimings } from "./timings.ts";

/**
 * The SubPool operator (seed 003): a cluster-scoped SubPool derives Namespace subpool-<name> and
 * the objects in it; the seed's 30 s look at the shared Gateway and proxy gateway is a sweep task.
 */
export const subPoolOperator = defineOperator({
  name: subPoolControllerName,
  kinds: [subPoolResource, ...subPoolOwnedResources],
  readinessFrom: [Resources.StatefulSet],
  crds: { module: "shared/controllers/subpool/crd.ts", exports: ["subPoolCrd"] },
  settings: subPoolSettings,
  allowLists: {
    names: ["kubefn-subpool-hostnames", "kubefn-subpool-images", "kubefn-subpool-limits"],
    // `*.<SUBPOOL_HOSTNAME_SUFFIX>`, and the envelope (SUBPOOL_MAX_CPU, SUBPOOL_MAX_MEMORY) as the
    // limits of kubefn-subpools-stay-within-limits.
    entries({ config }) {
      if ("invalid" in config) return [];
      return [
        ...(config.hostnameSuffix
          ? [{ list: "kubefn-subpool-hostnames", key: "host", value: `*.${config.hostnameSuffix}` }]
          : []),
        ...(["cpu", "memory"] as const).map((key) => ({
          list: "kubefn-subpool-limits",
          key,
          value: config.envelope[key],
        })),
      ];
    },
  },
  build(settings) {
    return {
      controller: () =>
        subPoolController({
          ...(settings ? { operatorConfig: settings.config } : {}),
          ...(settings?.recheckSeconds ? { timings: { activeRequeue: settings.recheckSeconds } } : {}),
        }),
      // SubPools say so as a bad SUBPOOL_* value does (Decision 1): InvalidOperatorConfig.
      stopped: (problems) => subPoolController({ operatorConfig: { invalid: problems.join("; ") } }),
      // The seed's 30 s look at the shared Gateway and proxy gateway, for all pools together.
      sweepTasks: sharedLook(settings?.config ?? defaultOperatorConfig),
    };
  },
  cluster: {
    admissionPolicies: [
      "kubefn-subpools-run-their-shape",
      "kubefn-subpools-stay-within-limits",
      "kubefn-routes-serve-their-pools-hostname",
    ],
    roles: [
      {
        kind: "ClusterRole",
        name: "kubefn-subpool",
        comment: `SubPool operator (seed 003): a cluster-scoped primary deriving Namespace subpool-<name> and the
objects in it. Cluster-wide it holds only the SubPools, their Namespaces and the right to grant
itself kubefn-subpool-objects inside each one it made: no get, list or watch of ConfigMaps,
Secrets, Services, ServiceAccounts, StatefulSets or NetworkPolicies anywhere else. The admission
policy allows writes only to Namespaces named subpool-* and to objects carrying the operator's
managed-by label.`,
        rules: [
          { apiGroups: ["subrelay.example.com"], resources: ["subpools"], verbs: ["get", "list", "patch"] },
          { apiGroups: ["subrelay.example.com"], resources: ["subpools/status"], verbs: ["patch"] },
          {
            comment: `get, create or update: step 5 of a pass; delete: the finalizer pass. list: the sweep's drift
list of the pools' Namespaces, metadata-only (PartialObjectMetadata), by the pool label.`,
            apiGroups: [""],
            resources: ["namespaces"],
            verbs: ["get", "list", "create", "update", "delete"],
          },
          {
            comment: `What a SubPool derives inside its Namespace is kubefn-subpool-objects' (below), bound to
kubefn itself by a RoleBinding kubefn makes in each SubPool's Namespace with the Namespace:
create RoleBindings, and bind on that one ClusterRole (a subject may bind a role it does not
hold only with bind on it). The admission policy admits no other RoleBinding, role, subject or
Namespace than a subpool-* Namespace carrying kubefn's pool labels.`,
            apiGroups: ["rbac.authorization.k8s.io"],
            resources: ["rolebindings"],
            verbs: ["create"],
          },
          {
            apiGroups: ["rbac.authorization.k8s.io"],
            resources: ["clusterroles"],
            verbs: ["bind"],
            resourceNames: [subPoolObjectsRole],
          },
          {
            comment: `The Gateway a Gateway-mode pool's route attaches to (its status is read), and the shared
proxy gateway's endpoints (ProxyGatewayReady): state no pool owns, read only.`,
            apiGroups: ["gateway.networking.k8s.io"],
            resources: ["gateways"],
            verbs: ["get"],
          },
          { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list"] },
        ],
        bound: true,
      },
      {
        kind: "ClusterRole",
        name: subPoolObjectsRole,
        comment: `What a SubPool derives inside its Namespace, bound only there, by kubefn (see above): no
ClusterRoleBinding of it is installed. ensureObject reads by name, then creates or updates (owned
fields only); nothing is listed but legacy LimitRanges (by the pool label, then deleted) — the
sweep lists no kind of these, their changes reach the pool as events (intake maps a key in
subpool-<name> to its pool).`,
        rules: [
          {
            comment: "The credential Secret: read by name, generated when missing, never listed.",
            apiGroups: [""],
            resources: ["secrets"],
            verbs: ["get", "create", "update"],
          },
          {
            apiGroups: [""],
            resources: ["configmaps", "serviceaccounts", "services", "resourcequotas"],
            verbs: ["get", "create", "update"],
          },
          { apiGroups: ["apps"], resources: ["statefulsets"], verbs: ["get", "create", "update"] },
          {
            apiGroups: ["networking.k8s.io"],
            resources: ["networkpolicies"],
            verbs: ["get", "create", "update"],
          },
          { apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: ["get", "create", "update"] },
          {
            comment: "LimitRanges of earlier operator versions are listed by the pool label and deleted.",
            apiGroups: [""],
            resources: ["limitranges"],
            verbs: ["list", "delete"],
          },
          {
            comment: "The route in Gateway mode (deleted when suspended or switched to Internal).",
            apiGroups: ["gateway.networking.k8s.io"],
            resources: ["httproutes"],
            verbs: ["get", "create", "update", "delete"],
          },
        ],
        bound: false,
      },
    ],
    audit: [
      {
        comment: `What a SubPool derives lives in Namespace subpool-<name> (or is that Namespace): the intake
maps it to its SubPool from the key alone (subPoolFromKey), so no body is needed. The
StatefulSet's status writes (its ready replicas, written by the StatefulSet controller) are a
look at the pool's readiness (readinessFrom): their key is all intake needs, and no Pod spec or
env leaves the API server with them.`,
        level: "Metadata",
        resources: [
          { group: "", resources: ["services", "serviceaccounts", "resourcequotas", "namespaces"] },
          {
            group: "apps",
            resources: ["statefulsets", "statefulsets/status", "statefulsets/scale", "deployments"],
          },
          { group: "networking.k8s.io", resources: ["networkpolicies"] },
          { group: "policy", resources: ["poddisruptionbudgets"] },
        ],
      },
    ],
    primaryAudit: [
      {
        comment: `SubPools: the request and the stored object, so intake can apply the seed's predicate (a
pass on create, delete and generation change; none on label-, annotation- or status-only
writes). Their specs hold no secret material.`,
        level: "RequestResponse",
        resources: [{ group: "subrelay.example.com", resources: ["subpools"] }],
      },
    ],
  },
});

/**
 * The seed's 30 s look at what no pool owns, half a drift period after each drift (none while the
 * SubPool settings are invalid: SubPools are not reconciled then).
 */
function sharedLook(config: OperatorConfig | InvalidOperatorConfig): SweepTask[] {
  if ("invalid" in config) return [];
  return [sharedLookSweepTask(config, Math.floor(defaultSubPoolTimings.resync / 2))];
}
