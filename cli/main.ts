/**
 * The `kubefn` command (package.json `bin`).
 *
 *   kubefn version                  this kubefn's version, and the CRD versions it serves
 *   kubefn install [--platform node|cloudflare|aws] [--relay [--intake-url <url>]]
 *                  [--self-usernames <a,b>] [--dry-run]
 *                                   server-side apply install.yaml (the cluster side), the
 *                                   in-cluster host for --platform node, the relay and its Secret
 *                                   for --relay (dry run: what would change)
 *   kubefn uninstall [--timeout <s>] kubefn's objects first (while kubefn still runs their
 *                                   finalizers), then everything an install made
 *   kubefn doctor [--as ns/name] [--intake-timeout <s>] [--clusters <a,b,…|@file>]
 *                                   is the current cluster ready for this kubefn? (exit 1 if not)
 *                                   With --clusters, each of a fleet's, by its kubeconfig context
 *
 * Common options: --kubeconfig <file>, --context <name>, --file <install.yaml> (default: this
 * release's, built from infra/ as `npm run release` builds it).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseAllDocuments } from "yaml";
import { profileObjects } from "../install/index.ts";
import { type Cluster, currentCluster, type KubeObject } from "./cluster.ts";
import {
  accessChecks,
  crdChecks,
  fleetNames,
  formatChecks,
  formatFleetChecks,
  intakeCheck,
  neededAccess,
  parseIdentity,
  policyChecks,
  unreachable,
} from "./doctor.ts";
import { install, report } from "./install.ts";
import {
  ensureIntakeSecret,
  identitiesFor,
  installChoice,
  intakeSecretKeys,
  nextSteps,
  platforms,
  renderIdentities,
} from "./profile.ts";
import { formatUninstall, uninstall, uninstallObjects } from "./uninstall.ts";

const root = join(import.meta.dirname, "..");
export const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string })
  .version;

/** The identity infra/rbac binds kubefn's roles to. */
export const KUBEFN_IDENTITY = "kubefn-system/kubefn";

const usage = `usage: kubefn <command> [options]

  version                 print this kubefn's version
  install [--dry-run]     server-side apply install.yaml (CRDs, RBAC, admission policies) to the
                          current cluster (--dry-run: created/changed/unchanged per object, nothing written)
          [--platform ${platforms.join("|")}]   node: also the in-cluster host
          [--relay] [--intake-url url]  also the relay (no audit webhook), posting to url (default
                          for --platform node: the in-cluster host), and its Secret
          [--self-usernames a,b]  kubefn's identities (default: SELF_USERNAMES, else the cluster's)
  uninstall [--timeout s] delete kubefn's Proxies, SubPools and Sites, wait for their finalizers
                          (default 300 s), then everything an install made; exit 1 naming what hangs
  doctor [--as ns/name]   check kubefn's access, admission policies and CRDs on the current cluster,
         [--intake-timeout s]  and that intake receives the cluster's events (default: wait 30 s)
         [--clusters a,b|@file]  each cluster of a fleet instead, through the kubeconfig context of
                          its name (@file: the names a KUBEFN_CLUSTERS file declares), at once

options: --kubeconfig <file>  --context <name>  --file <install.yaml>  --version`;

function releaseObjects(file: string | undefined, profile = { host: false }): KubeObject[] {
  if (!file) return profileObjects(root, version, profile) as KubeObject[];
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJSON() as KubeObject | null)
    .filter((o): o is KubeObject => Boolean(o?.kind));
}

/** Runs one command; returns its output and exit code (the caller prints and exits). */
export async function main(
  argv: string[],
  cluster?: (o: { kubeconfig?: string; context?: string }) => Cluster,
  env: Record<string, string | undefined> = process.env,
) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "dry-run": { type: "boolean" },
      platform: { type: "string" },
      relay: { type: "boolean" },
      "intake-url": { type: "string" },
      "self-usernames": { type: "string" },
      timeout: { type: "string", default: "300" },
      as: { type: "string", default: KUBEFN_IDENTITY },
      "intake-timeout": { type: "string", default: "30" },
      clusters: { type: "string" },
      kubeconfig: { type: "string" },
      context: { type: "string" },
      file: { type: "string" },
      help: { type: "boolean", short: "h" },
      version: { type: "boolean" },
    },
  });
  // `kubefn --version` is `kubefn version`.
  const [command, ...rest] = values.version ? ["version", ...positionals] : positionals;
  if (values.help || !command) return { out: usage, code: command || values.help ? 0 : 2 };
  if (rest.length > 0) return { out: `unexpected argument ${rest[0]}\n${usage}`, code: 2 };
  const connect = () =>
    (cluster ?? currentCluster)({
      ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
      ...(values.context ? { context: values.context } : {}),
    });
  switch (command) {
    case "version": {
      const crds = releaseObjects(values.file).filter((o) => o.kind === "CustomResourceDefinition");
      // One entry per API group and its versions (Site and machina's Machine share one).
      const served = [
        ...new Set(
          crds.map((c) => {
            const spec = c.spec as { group: string; versions: Array<{ name: string }> };
            return `${spec.group}/${spec.versions.map((v) => v.name).join(",")}`;
          }),
        ),
      ];
      return { out: `kubefn ${version}\nCRDs: ${served.join(" ")}`, code: 0 };
    }
    case "install": {
      const dryRun = values["dry-run"] === true;
      const choice = installChoice({
        ...(values.platform !== undefined ? { platform: values.platform } : {}),
        relay: values.relay === true,
        ...(values["intake-url"] !== undefined ? { intakeUrl: values["intake-url"] } : {}),
      });
      if ("error" in choice) return { out: `${choice.error}\n${usage}`, code: 2 };
      const c = connect();
      const identities = await identitiesFor(c, values["self-usernames"] ?? env.SELF_USERNAMES);
      const objects = renderIdentities(
        releaseObjects(values.file, {
          host: choice.platform === "node",
          ...(choice.relayIntakeUrl ? { relay: { intakeUrl: choice.relayIntakeUrl } } : {}),
        }),
        identities,
      );
      const changes = await install(c, objects, { dryRun });
      const keys = intakeSecretKeys(choice);
      if (keys.length > 0) changes.push(await ensureIntakeSecret(c, keys, { dryRun }));
      return { out: [report(changes, dryRun), ...nextSteps(choice, identities)].join("\n"), code: 0 };
    }
    case "uninstall": {
      const timeoutSeconds = Number(values.timeout);
      if (!Number.isFinite(timeoutSeconds) || timeoutSeconds < 0) {
        return { out: `--timeout must be a number of seconds\n${usage}`, code: 2 };
      }
      const result = await uninstall(connect(), uninstallObjects(root, version), { timeoutSeconds });
      return { out: formatUninstall(result), code: result.ok ? 0 : 1 };
    }
    case "doctor": {
      const id = parseIdentity(values.as as string);
      const intakeTimeout = Number(values["intake-timeout"]);
      if (!Number.isFinite(intakeTimeout) || intakeTimeout < 0) {
        return { out: `--intake-timeout must be a number of seconds\n${usage}`, code: 2 };
      }
      const objects = releaseObjects(values.file);
      const checksOf = async (c: Cluster) => [
        ...(await crdChecks(
          c,
          objects.filter((o) => o.kind === "CustomResourceDefinition"),
          version,
        )),
        ...(await policyChecks(
          c,
          id,
          objects.filter((o) => o.kind.startsWith("ValidatingAdmissionPolicy")),
        )),
        ...(await accessChecks(c, id, neededAccess(objects, parseIdentity(KUBEFN_IDENTITY)))),
        await intakeCheck(c, { timeoutSeconds: intakeTimeout, nonce: randomUUID().slice(0, 8) }),
      ];
      if (values.clusters !== undefined) {
        const names = fleetNames(values.clusters);
        if ("error" in names) return { out: `${names.error}\n${usage}`, code: 2 };
        const results = await Promise.all(
          names.names.map(async (name) => {
            try {
              const c = (cluster ?? currentCluster)({
                ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
                context: name,
              });
              return { cluster: name, checks: await checksOf(c) };
            } catch (err) {
              return { cluster: name, checks: [unreachable(name, err)] };
            }
          }),
        );
        const report = formatFleetChecks(results);
        return { out: report.text, code: report.ok ? 0 : 1 };
      }
      const checks = await checksOf(connect());
      const failed = checks.filter((x) => !x.ok).length;
      const summary =
        failed === 0 ? `all ${checks.length} checks passed` : `${failed} of ${checks.length} checks failed`;
      return { out: `${formatChecks(checks)}\n${summary}`, code: failed === 0 ? 0 : 1 };
    }
    default:
      return { out: `unknown command ${command}\n${usage}`, code: 2 };
  }
}

/** Runs `argv`, prints the output (usage errors to stderr) and exits with the command's code. */
export async function run(argv: string[]): Promise<never> {
  try {
    const { out, code } = await main(argv);
    (code === 2 ? process.stderr : process.stdout).write(`${out}\n`);
    process.exit(code);
  } catch (err) {
    process.stderr.write(`kubefn: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

if (import.meta.filename === process.argv[1]) await run(process.argv.slice(2));
