import type { Hono } from "hono/tiny";
import type { ProbeAllowList, Prober } from "../health/index.ts";
import type { Kube, KubeObject, Resource } from "../kube/index.ts";
import type { Context, ControllerDefinition, SweepTask } from "../runtime/index.ts";
import type * as z from "../zod/index.ts";
import type { ProvidersByName } from "./proxy/providers/index.ts";

/**
 * What a platform gives every operator when it builds them: its ports and the platform-wide
 * settings (the sweep's period, probe budgets, the crawler API's token). An operator takes what
 * it needs and ignores the rest; its own settings arrive apart, parsed by its {@link OperatorSettingsDeclaration}.
 */
export interface OperatorOptions {
  prober: Prober;
  /** How often the platform runs the sweep (the cron period). */
  sweepPeriodSeconds: number;
  probeConcurrency?: number;
  /** Probes in flight per namespace (per instance); half of `probeConcurrency` when unset. */
  probeNamespaceConcurrency?: number;
  /** Whose the probe slots are: the instance's (default) or each invocation's (`proxyHealthTask`'s `slotScope`). */
  probeSlotScope?: "instance" | "invocation";
  /** Fan health probes out through the queue in shards of this many Proxies (unset: probe in the sweep). */
  probeShardSize?: number;
  /** Providers beyond the built-in Kubernetes pod provider (e.g. "gce"). */
  providers?: (kube: Kube) => ProvidersByName;
  /** Least time between two status-affecting health reports of one Proxy. */
  minReportIntervalSeconds?: number;
  /** Bearer token for the crawler API (`/v1/proxies`, `/v1/leases`); the API is off without it. */
  apiToken?: string;
  /** How old an untracked provider instance must be before the orphan collector deletes it. */
  orphanGraceSeconds?: number;
  /**
   * The operators' own settings, by operator name, as each operator's settings declaration parsed
   * them once in the adapter; each operator's defaults when absent.
   */
  settings?: Readonly<Record<string, unknown>>;
  /** Site component manifests read from a directory (Node host only); the embedded bundle otherwise. */
  siteManifests?: readonly KubeObject[];
  /**
   * Loopback, private and link-local destinations probes and External endpoints may name; the
   * proxy operator's `PROBE_ALLOWED_CIDRS` when unset, else none.
   */
  probeAllowList?: ProbeAllowList;
  /** Overrides the `fetch` of providers that call out (GCE); tests only. */
  fetch?: typeof fetch;
}

/** What one operator runs, built once per platform instance by {@link Operator.build}. */
export interface OperatorParts {
  /**
   * Its controller. Built inside the runtime's `startable`: a definition a setting made invalid
   * stops this operator only.
   */
  controller: () => ControllerDefinition;
  /** The stand-in when `controller` is refused (default: the runtime's `stoppedController`). */
  stopped?: (problems: readonly string[]) => ControllerDefinition;
  /** Its periodic tasks, run by every sweep. */
  sweepTasks?: readonly SweepTask[];
  /** HTTP routes mounted beside the intake. */
  routes?: (ctx: Context) => Hono;
}

/** A numeric setting parsed by the operator itself (not by zod), so a bad value stops it alone. */
export interface OperatorSettingRange {
  min: number;
  max?: number;
  integer: boolean;
}

/**
 * An operator's start-up settings: the variables it adds to the one settings schema (the same
 * names on every platform) and how it turns their parsed values into its settings.
 */
export interface OperatorSettingsDeclaration<Vars extends Record<string, z.ZodMiniType>, Settings> {
  variables: Vars;
  /** Ranges of variables taken as strings and checked by `parse` (test/unit/setting-bounds.test.ts). */
  ranges?: Readonly<Record<string, OperatorSettingRange>>;
  /**
   * Cross-field rules. `issues` (one line each, naming the variable, never echoing credentials)
   * stop the process; a problem that should stop only this operator belongs in the settings
   * themselves, said by {@link invalid}.
   */
  parse(
    values: z.infer<z.ZodMiniObject<Vars>>,
    selfUsernames: readonly string[],
  ): { ok: true; settings: Settings } | { ok: false; issues: string[] };
  /** Why these settings stop the operator (its primaries say so on Ready), when they do. */
  invalid?(settings: Settings): string | undefined;
}

/** A metric family an operator emits: `# HELP` / `# TYPE`, and a histogram's buckets. */
export interface MetricFamily {
  type: "counter" | "gauge" | "histogram";
  help: string;
  /** Upper bounds in seconds (a histogram only); kubefn's latency buckets when unset. */
  buckets?: readonly number[];
  /**
   * The labels that name one object (its `namespace` and `name`, …): the Node host keeps such
   * series and forgets them with their object; a platform billing per series strips them.
   */
  objectLabels?: readonly string[];
  /**
   * A gauge with {@link objectLabels} kept, where series per object are not, as one series: the
   * latest value of any object (e.g. the last probe's time, which a staleness alert reads).
   */
  latestOfAny?: boolean;
}

/** Metric families by name. */
export type MetricFamilies = Readonly<Record<string, MetricFamily>>;

/** One entry of an installer's allow-list: a key of a ConfigMap in kubefn-system an admission policy reads. */
export interface AllowListEntry {
  list: string;
  key: string;
  value: string;
}

/**
 * The installer's allow-lists its admission policies read (infra/rbac/admission-policy-shapes.yaml),
 * and the entries that admit what its settings ask it to run and serve: a host that installs
 * kubefn itself applies them.
 */
export interface OperatorAllowLists<Settings> {
  /** The ConfigMaps (in kubefn-system) by name. */
  names: readonly string[];
  /** The entries `settings` need (pure); each `list` one of {@link names}. */
  entries(settings: Settings): AllowListEntry[];
}

/** One rule of an RBAC role, as infra/rbac writes it (flow lists, a comment above). */
export interface RbacRule {
  comment?: string;
  apiGroups: readonly string[];
  resources: readonly string[];
  verbs: readonly string[];
  resourceNames?: readonly string[];
}

/** A Role or ClusterRole of infra/rbac/kubefn.yaml, bound to kubefn's ServiceAccount when `bound`. */
export interface RbacRole {
  kind: "ClusterRole" | "Role";
  name: string;
  /** Role only. */
  namespace?: string;
  /** The comment above the role, one line each. */
  comment?: string;
  labels?: Readonly<Record<string, string>>;
  rules: readonly RbacRule[];
  /** Bind it to kubefn's ServiceAccount (a ClusterRoleBinding or RoleBinding of the same name). */
  bound: boolean;
}

/** One rule of the audit policy (infra/audit/policy.yaml). */
export interface AuditRule {
  comment: string;
  level: "None" | "Metadata" | "Request" | "RequestResponse";
  namespaces?: readonly string[];
  resources: readonly { group: string; resources?: readonly string[] }[];
}

/**
 * What the cluster must grant and log for an operator's kinds; `npm run gen:cluster` writes it
 * into infra/rbac, infra/audit, infra/relay, infra/argocd and the chart. The relay's grants and
 * the Argo CD health checks follow from {@link Operator.kinds} and {@link Operator.crds} alone.
 */
export interface OperatorCluster {
  /** kubefn's own roles for this operator. */
  roles: readonly RbacRole[];
  /** Roles for people (aggregated into `edit`/`view`), after every operator's own. */
  userRoles?: readonly RbacRole[];
  /**
   * Audit rules for the objects it owns or watches, placed before the primaries' rules
   * (namespace-scoped rules of every operator first: the first matching rule decides).
   */
  audit?: readonly AuditRule[];
  /** Audit rules for its primaries, between the status rule and the groups' Metadata rule. */
  primaryAudit?: readonly AuditRule[];
  /**
   * The ValidatingAdmissionPolicies (infra/rbac/admission-policy*.yaml) that contain its writes,
   * each bound by a binding of the same name: kubefn reconciles only while every operator's and
   * its own are installed and bound (the admission gate, `kubefn doctor`).
   */
  admissionPolicies?: readonly string[];
}

/**
 * One operator, one module: everything kubefn needs to run it (its controller, sweep tasks,
 * routes and jobs, its settings) and to install it (CRDs, RBAC, audit and relay rules). A new
 * operator is a folder with an `operator.ts` and one line in `operators`
 * (shared/controllers/index.ts).
 *
 * @example
 * export const widgetOperator = defineOperator({
 *   name: "widget",
 *   kinds: [widgetResource],
 *   crds: { module: "shared/controllers/widget/crd.ts", exports: ["widgetCrd"] },
 *   build: () => ({ controller: () => widgetController() }),
 *   cluster: { roles: [widgetRole] },
 * });
 */
export interface Operator<
  Name extends string = string,
  Vars extends Record<string, z.ZodMiniType> = Record<string, z.ZodMiniType>,
  Settings = unknown,
> {
  /** Its controller's name: the `controller` of every key. */
  name: Name;
  /**
   * Every kind it reads: its primary first, the kinds it owns and those it watches — what its
   * controller's `for`, `owns` and `watches` declare (a unit test holds them equal). The relay
   * list-watches these without building the operator.
   */
  kinds: readonly Resource[];
  /**
   * The owned kinds whose readiness its controller reports — its `readinessFrom` (a unit test
   * holds them equal): the relay forwards their status writes that change readiness.
   */
  readinessFrom?: readonly Resource[];
  /**
   * Where the CRDs of the kinds it serves are declared (`npm run gen:crds`, the installers): a
   * module by its path from the repository root and the names of its `CrdSpec` exports. Named, not
   * imported: the CRD notes (descriptions, CEL rules) stay out of the runtime and the Worker bundle;
   * install/ loads them (`operatorCrds`).
   */
  crds: CrdModule;
  settings?: OperatorSettingsDeclaration<Vars, Settings>;
  /** The metric families it emits beside the runtime's (a unit test holds them to what the code emits). */
  metricFamilies?: MetricFamilies;
  /** Its installer's allow-lists. */
  allowLists?: OperatorAllowLists<Settings>;
  /**
   * Directories of manifests the Node host may be given at start (a Worker has no filesystem):
   * the variable naming one and the option its objects are built with.
   */
  manifestDirectories?: readonly ManifestDirectory[];
  /** Builds what it runs; `settings` undefined: its defaults. */
  build(settings: Settings | undefined, options: OperatorOptions): OperatorParts;
  cluster: OperatorCluster;
}

/** The options an operator takes as objects read from manifests. */
export type ManifestOption = {
  [K in keyof OperatorOptions]-?: NonNullable<OperatorOptions[K]> extends readonly KubeObject[] ? K : never;
}[keyof OperatorOptions];

/** A directory of manifests an operator may be given (see {@link Operator.manifestDirectories}). */
export interface ManifestDirectory {
  /** The Node host's variable naming the directory. */
  variable: string;
  /** The option the directory's objects are passed as. */
  option: ManifestOption;
  /** What the objects are, for the settings page. */
  meaning: string;
}

/** A module of `CrdSpec`s: its path from the repository root and the exports to read, in order. */
export interface CrdModule {
  module: string;
  exports: readonly string[];
}

/** Any operator, whatever its settings. */
// biome-ignore lint/suspicious/noExplicitAny: an operator's settings type is its own.
export type AnyOperator = Operator<string, any, any>;

/** Declares an operator with its types inferred (an identity function). */
export function defineOperator<
  const Name extends string,
  Vars extends Record<string, z.ZodMiniType>,
  Settings,
>(operator: Operator<Name, Vars, Settings>): Operator<Name, Vars, Settings> {
  return operator;
}

/** The settings an operator's declaration parses to. */
export type SettingsOf<O> = O extends Operator<string, Record<string, z.ZodMiniType>, infer S> ? S : never;

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void
  ? I
  : never;

/** The variables every operator of `L` adds to the settings schema, as one object type. */
export type VariablesOf<L extends readonly AnyOperator[]> = UnionToIntersection<
  {
    [I in keyof L]: // biome-ignore lint/suspicious/noExplicitAny: any settings
    L[I] extends Operator<string, infer V, any> ? V : never;
  }[number]
>;

/** The settings of every operator of `L`, by name. */
export type SettingsByName<L extends readonly AnyOperator[]> = {
  [O in L[number] as O["name"]]: SettingsOf<O>;
};
