/**
 * Writes what the cluster side says about each operator's kinds from the one list of operators
 * (shared/controllers/index.ts `operators`), so that a new operator is one folder and one line:
 *
 * - infra/rbac/kubefn.yaml: each operator's roles and bindings (`cluster.roles`, `cluster.userRoles`);
 * - infra/audit/policy.yaml: the rules for what operators own and watch, the primaries' status
 *   writes and their API groups (`cluster.audit`, `cluster.primaryAudit`, the CRDs);
 * - infra/relay/manifests.yaml and the chart's templates/relay.yaml: the relay's read-only grants,
 *   one per kind it list-watches (`kinds`, as the relay itself reads them);
 * - infra/rbac/admission-policy*.yaml: the lists of kubefn's primaries the policies match;
 * - infra/argocd: a health check per primary kind (health/<group>/<Kind>/health.lua and argocd-cm.yaml).
 *
 * Only the blocks between `# BEGIN generated <name>` and `# END generated <name>` are written;
 * the rest of each file stays hand-written. With `--check`, writes nothing and exits 1 when a
 * committed file differs (test/unit/gen-cluster.test.ts fails on the same difference).
 *
 * Usage: npm run gen:cluster [-- --check]
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { relayKindsOfOperators } from "../infra/relay/index.ts";
import { operatorCrds } from "../install/index.ts";
import {
  type AnyOperator,
  type AuditRule,
  controllerKinds,
  operators,
  type RbacRole,
  type RbacRule,
} from "../shared/controllers/index.ts";
import type { CrdSpec } from "../shared/crd/index.ts";

const root = fileURLToPath(new URL("../", import.meta.url));

/** The canonical Argo CD health script, copied for every primary kind. */
export const argocdHealthScriptPath = "scripts/argocd-health.lua";

const quote = (s: string) => JSON.stringify(s);
const flow = (items: readonly string[]) => `[${items.map(quote).join(", ")}]`;

function comment(text: string | undefined, indent = ""): string {
  if (!text) return "";
  return `${text
    .split("\n")
    .map((line) => (line ? `${indent}# ${line}` : `${indent}#`))
    .join("\n")}\n`;
}

function ruleYaml(rule: RbacRule): string {
  const lines = [`  - apiGroups: ${flow(rule.apiGroups)}`, `    resources: ${flow(rule.resources)}`];
  lines.push(`    verbs: ${flow(rule.verbs)}`);
  if (rule.resourceNames) lines.push(`    resourceNames: ${flow(rule.resourceNames)}`);
  return comment(rule.comment, "  ") + lines.join("\n");
}

function roleYaml(role: RbacRole): string {
  const meta = [`  name: ${role.name}`];
  if (role.namespace) meta.push(`  namespace: ${role.namespace}`);
  if (role.labels) {
    meta.push("  labels:");
    for (const [k, v] of Object.entries(role.labels)) meta.push(`    ${k}: ${quote(v)}`);
  }
  const docs = [
    `${comment(role.comment)}apiVersion: rbac.authorization.k8s.io/v1
kind: ${role.kind}
metadata:
${meta.join("\n")}
rules:
${role.rules.map(ruleYaml).join("\n")}
`,
  ];
  if (role.bound) {
    const binding = role.kind === "Role" ? "RoleBinding" : "ClusterRoleBinding";
    docs.push(`apiVersion: rbac.authorization.k8s.io/v1
kind: ${binding}
metadata:
  name: ${role.name}
${role.namespace ? `  namespace: ${role.namespace}\n` : ""}roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ${role.kind}
  name: ${role.name}
subjects:
  - kind: ServiceAccount
    name: kubefn
    namespace: kubefn-system
`);
  }
  return docs.join("---\n");
}

/** kubefn's roles for every operator of `list`, as YAML documents. */
export function rbacRoles(list: readonly AnyOperator[]): string {
  return list
    .flatMap((o) => o.cluster.roles)
    .map(roleYaml)
    .join("---\n");
}

/** The roles for people every operator of `list` declares (aggregated into edit/view). */
export function rbacUserRoles(list: readonly AnyOperator[]): string {
  return list
    .flatMap((o) => o.cluster.userRoles ?? [])
    .map(roleYaml)
    .join("---\n");
}

function auditRuleYaml(rule: AuditRule): string {
  const lines = [`  - level: ${rule.level}`];
  if (rule.namespaces) lines.push(`    namespaces: ${flow(rule.namespaces)}`);
  lines.push("    resources:");
  for (const r of rule.resources) {
    lines.push(`      - group: ${quote(r.group)}`);
    if (r.resources) lines.push(`        resources: ${flow(r.resources)}`);
  }
  return `${comment(rule.comment, "  ")}${lines.join("\n")}\n`;
}

/**
 * The audit rules for what the operators own and watch: namespace-scoped ones first (the first
 * matching rule decides, and a namespace's rule is the narrower), then the rest, in list order.
 */
export function auditObjectRules(list: readonly AnyOperator[]): string {
  const rules = list.flatMap((o) => o.cluster.audit ?? []);
  return [...rules.filter((r) => r.namespaces), ...rules.filter((r) => !r.namespaces)]
    .map(auditRuleYaml)
    .join("\n");
}

/** The audit rules for the primaries: their status writes, each operator's own, their API groups. */
export function auditPrimaryRules(list: readonly AnyOperator[], crds: readonly CrdSpec[]): string {
  const status: AuditRule = {
    comment: `Status writes of the primaries: the stored object, so intake can check kubefn's seal on the
status (a status written with kubefn's token outside kubefn brings a pass at once). Statuses
hold no secret material (addresses, phases, conditions, probe bookkeeping), but the stored
object is the whole Proxy: a spec's inline cloud-init reaches the audit log with it (use
cloudInit.secretRef for anything secret). Where that is not acceptable, move proxies/status
to the Metadata rule below: a forged Proxy status is then found by the next sweep instead.`,
    level: "RequestResponse",
    resources: crds.map((c) => ({ group: c.group, resources: [`${c.plural}/status`] })),
  };
  const groups: AuditRule = {
    comment: `Proxies (a spec may hold inline cloud-init) and the rest of these groups: which object
changed, how, by whom. Bodies are fetched by the functions themselves when needed.`,
    level: "Metadata",
    resources: [...new Set(crds.map((c) => c.group))].map((group) => ({ group })),
  };
  return [status, ...list.flatMap((o) => o.cluster.primaryAudit ?? []), groups].map(auditRuleYaml).join("\n");
}

/**
 * The relay's read-only rules: one per primary kind, then the other kinds by API group (in order
 * of first appearance), exactly the kinds the relay list-watches.
 */
export function relayRules(list: readonly AnyOperator[]): string {
  const kinds = relayKindsOfOperators(controllerKinds(list)).map((k) => k.resource);
  const primaryKinds = new Set(list.map((o) => `${o.kinds[0]?.group}/${o.kinds[0]?.resource}`));
  const rules: RbacRule[] = [];
  const byGroup = new Map<string, string[]>();
  for (const kind of kinds) {
    if (primaryKinds.has(`${kind.group}/${kind.resource}`)) {
      rules.push({ apiGroups: [kind.group], resources: [kind.resource], verbs: ["get", "list", "watch"] });
    } else {
      const resources = byGroup.get(kind.group) ?? [];
      resources.push(kind.resource);
      byGroup.set(kind.group, resources);
    }
  }
  for (const [group, resources] of byGroup) {
    rules.push({ apiGroups: [group], resources, verbs: ["get", "list", "watch"] });
  }
  return `${rules.map(ruleYaml).join("\n")}\n`;
}

/** The API groups of kubefn's primaries, as an admission policy's rule names them. */
export function primaryGroups(crds: readonly CrdSpec[]): string {
  return flow([...new Set(crds.map((c) => c.group))]);
}

/** Every primary's resource, then every primary's status subresource. */
export function primaryResources(crds: readonly CrdSpec[], which: "both" | "status"): string {
  const status = crds.map((c) => `${c.plural}/status`);
  return flow(which === "status" ? status : [...crds.map((c) => c.plural), ...status]);
}

/** argocd-cm.yaml: every primary kind's health check, each the canonical script verbatim. */
export function argocdConfigMap(crds: readonly CrdSpec[], script: string): string {
  const entries = crds.map(
    (c) =>
      `  resource.customizations.health.${c.group}_${c.kind}: |\n${script
        .split("\n")
        .map((line) => (line ? `    ${line}` : line))
        .join("\n")
        .replace(/\n$/, "")}\n`,
  );
  return `# Argo CD health checks for kubefn's primaries: merge into the argocd-cm ConfigMap of your Argo CD
# installation (e.g. \`kubectl -n argocd patch configmap argocd-cm --patch-file infra/argocd/argocd-cm.yaml\`,
# or as a kustomize patch). Each value is health/<group>/<Kind>/health.lua verbatim (a unit test
# holds them equal); test/kstatus runs them in gopher-lua, as Argo CD does. Generated by
# \`npm run gen:cluster\` from scripts/argocd-health.lua for every operator's CRDs; do not edit.
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
data:
${entries.join("")}`;
}

/** One generated block of a hand-written file. */
interface Region {
  file: string;
  name: string;
  render: (list: readonly AnyOperator[], crds: readonly CrdSpec[]) => string;
}

/**
 * The blocks this generator owns. A block's text replaces the lines between its markers; where a
 * marker carries `inline`, the generated value replaces the rest of the next line after its key.
 */
const regions: Region[] = [
  { file: "infra/rbac/kubefn.yaml", name: "roles", render: rbacRoles },
  { file: "infra/rbac/kubefn.yaml", name: "user roles", render: rbacUserRoles },
  { file: "infra/audit/policy.yaml", name: "object rules", render: auditObjectRules },
  { file: "infra/audit/policy.yaml", name: "primary rules", render: auditPrimaryRules },
  { file: "infra/relay/manifests.yaml", name: "relay rules", render: relayRules },
  { file: "charts/kubefn/templates/relay.yaml", name: "relay rules", render: relayRules },
];

/**
 * The admission policies' lists of primaries (the policies themselves stay hand-written): the
 * line after a `# generated: <what>` comment gets `<key>: <list>`.
 */
const inlineLists: Record<string, (crds: readonly CrdSpec[]) => string> = {
  "primary groups": primaryGroups,
  "primary resources": (crds) => primaryResources(crds, "both"),
  "primary status": (crds) => primaryResources(crds, "status"),
};

const inlineFiles = ["infra/rbac/admission-policy.yaml", "infra/rbac/admission-policy-shapes.yaml"];

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** `text` with the region's block rendered for `list`. Throws when the markers are missing. */
export function withRegion(
  text: string,
  region: Region,
  list: readonly AnyOperator[],
  crds: readonly CrdSpec[],
): string {
  const name = escapeRegExp(region.name);
  const pattern = new RegExp(
    `(^[ \\t]*# BEGIN generated ${name}:[^\\n]*\\n)[\\s\\S]*?(^[ \\t]*# END generated ${name}\\n)`,
    "m",
  );
  if (!pattern.test(text)) throw new Error(`${region.file}: no "# BEGIN generated ${region.name}" block`);
  const body = region.render(list, crds);
  return text.replace(pattern, (_, begin: string, end: string) => `${begin}${body}${end}`);
}

/** `text` with every `# generated: <what>` line's following list rendered for `list`. */
export function withInlineLists(text: string, crds: readonly CrdSpec[]): string {
  return text.replace(
    /^([ \t]*# generated: ([a-z ]+?)\n[ \t]*(?:- )?[A-Za-z]+: )[^\n]*$/gm,
    (_whole, head: string, what: string) => {
      const render = inlineLists[what];
      if (!render) throw new Error(`unknown generated list "${what}"`);
      return `${head}${render(crds)}`;
    },
  );
}

/**
 * Every file this generator writes, as it should read for `list`, by path relative to the
 * repository. `read` gives a file's committed text (its hand-written parts).
 */
export async function clusterFiles(
  list: readonly AnyOperator[],
  read: (path: string) => Promise<string> = (path) => readFile(join(root, path), "utf8"),
): Promise<Map<string, string>> {
  const crds = await operatorCrds(list);
  const files = new Map<string, string>();
  for (const region of regions) {
    const text = files.get(region.file) ?? (await read(region.file));
    files.set(region.file, withRegion(text, region, list, crds));
  }
  for (const file of inlineFiles) files.set(file, withInlineLists(await read(file), crds));
  const script = await read(argocdHealthScriptPath);
  files.set("infra/argocd/argocd-cm.yaml", argocdConfigMap(crds, script));
  for (const crd of crds) files.set(`infra/argocd/health/${crd.group}/${crd.kind}/health.lua`, script);
  return files;
}

/** health.lua files under infra/argocd/health no operator declares (to remove). */
async function staleHealthScripts(expected: Map<string, string>): Promise<string[]> {
  const dir = join(root, "infra/argocd/health");
  const entries = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
  return entries
    .filter((e) => e.endsWith("health.lua"))
    .map((e) => `infra/argocd/health/${e}`)
    .filter((path) => !expected.has(path));
}

async function main(argv: string[]): Promise<number> {
  const check = argv.includes("--check");
  const expected = await clusterFiles(operators);
  const stale = await staleHealthScripts(expected);
  const drift: string[] = [];
  for (const [path, text] of expected) {
    const onDisk = await readFile(join(root, path), "utf8").catch(() => undefined);
    if (onDisk === text) continue;
    if (check) drift.push(path);
    else {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
      console.log(`wrote ${path}`);
    }
  }
  for (const path of stale) {
    if (check) drift.push(`${path} (no operator declares its kind)`);
    else await rm(join(root, path));
  }
  if (drift.length > 0) {
    console.error(
      `the cluster manifests are out of date; run \`npm run gen:cluster\`:\n  ${drift.join("\n  ")}`,
    );
    return 1;
  }
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}
