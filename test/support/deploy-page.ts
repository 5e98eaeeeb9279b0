/**
 * What the deploy-page tests (docs/deploying/{node,cloudflare,aws}.md walked literally) share: the
 * page's commands run with bash in the release directory, the admin's kubectl for what a test
 * looks at, and the examples every page ends with — a Proxy through the test's forward proxy to
 * its target, the two SubPools and the Site — applied the page's way.
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { clusterInfo } from "../setup/cluster.ts";
import { type ChildOutput, outputOf } from "./child-output.ts";
import { fencedBlocks } from "./markdown.ts";
import { type TempDir, tempDir } from "./temp-dir.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface PageWalkOptions {
  /** The page, from the checkout's root: `docs/deploying/node.md`. */
  page: string;
  /** The release directory the commands run in (known once the test's `beforeAll` made it). */
  workDir: () => string;
  /** The admin's kubeconfig. */
  kubeconfig: () => string;
  /** Variables beyond the admin's kubeconfig and `kubectl` on the PATH (AWS's endpoint, …). */
  extraEnv?: () => NodeJS.ProcessEnv;
}

export interface PageWalk {
  /** The page's text. */
  readonly text: string;
  /** The environment the page's commands run in: `kubectl` on the PATH, the admin's kubeconfig. */
  env(): NodeJS.ProcessEnv;
  /** Runs one of the page's commands with bash in the release directory; a failure throws. */
  sh(command: string): Promise<ChildOutput>;
  /** The admin's kubectl, for what the test looks at (not the page's steps). */
  kubectl(...args: string[]): Promise<string>;
  /** The Ready condition's status of what `args` names (`get`, `proxy`, `local`, …). */
  readyCondition(...args: string[]): Promise<string>;
  /** The page's `sh` block whose text contains `marker`. */
  blockWith(marker: string): string;
  /** Applies the examples: the external Proxy aimed at `target` through `forwardProxy`, the pools, the Site. */
  applyExamples(target: { port: number }, forwardProxy: { port: number }): Promise<void>;
  /** Ready of the examples' Proxy, SubPool `demo-pool` and Site `lab`, in that order. */
  examplesReady(): Promise<string[]>;
  /** What the allow-list ConfigMap the page makes admits as `machina`'s image. */
  machinaImage(): Promise<string>;
  /** What of kubefn is left in the cluster: its CRDs, Namespaces, cluster roles, admission policies. */
  kubefnLeft(): Promise<string[]>;
}

/**
 * The release as a user unpacks it, in a temporary directory: `entries` of the checkout linked,
 * and `.bin/` holding a `kubectl` for the test's cluster and what `bins` gives for the directory
 * (name → shell line).
 */
export function unpackRelease(
  prefix: string,
  entries: readonly string[],
  bins: (dir: string) => Readonly<Record<string, string>> = () => ({}),
): TempDir {
  const work = tempDir(prefix);
  for (const entry of entries) symlinkSync(join(root, entry), join(work.path, entry));
  mkdirSync(join(work.path, ".bin"));
  const shims = { kubectl: `exec '${clusterInfo().devclusterBin}' kubectl "$@"`, ...bins(work.path) };
  for (const [name, line] of Object.entries(shims)) {
    writeFileSync(join(work.path, ".bin", name), `#!/bin/sh\n${line}\n`);
    chmodSync(join(work.path, ".bin", name), 0o755);
  }
  return work;
}

/** The `.bin/` line that runs the release's `kubefn` CLI from `work`. */
export const kubefnCli = (work: string): string =>
  `exec '${process.execPath}' '${join(work, "cli/kubefn.mjs")}' "$@"`;

export function walkPage(options: PageWalkOptions): PageWalk {
  const text = readFileSync(join(root, options.page), "utf8");
  const env = (): NodeJS.ProcessEnv => ({
    ...process.env,
    ...options.extraEnv?.(),
    PATH: `${join(options.workDir(), ".bin")}:${process.env.PATH}`,
    KUBECONFIG: options.kubeconfig(),
    KUBERNETES_SERVICE_HOST: "",
  });
  const sh = async (command: string): Promise<ChildOutput> => {
    const r = await outputOf(
      spawn("bash", ["-euo", "pipefail", "-c", command], { cwd: options.workDir(), env: env() }),
      "",
    );
    if (r.code !== 0)
      throw new Error(`the page's command failed (${r.code}):\n${command}\n${r.stdout}${r.stderr}`);
    return r;
  };
  const kubectl = async (...args: string[]): Promise<string> => {
    const r = await outputOf(
      spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", options.kubeconfig(), ...args]),
      "",
    );
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  const readyCondition = (...args: string[]) =>
    kubectl(...args, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}');
  return {
    text,
    env,
    sh,
    kubectl,
    readyCondition,
    blockWith(marker) {
      const block = fencedBlocks(text, "sh").find((b) => b.includes(marker));
      if (!block) throw new Error(`${options.page} has no sh block with ${marker}`);
      return block;
    },
    async applyExamples(target, forwardProxy) {
      const proxyYaml = readFileSync(join(root, "examples/proxy-external.yaml"), "utf8")
        .replaceAll("127.0.0.1:8081", `127.0.0.1:${target.port}`)
        .replace(/port: 3128/, `port: ${forwardProxy.port}`);
      writeFileSync(join(options.workDir(), "proxy.yaml"), proxyYaml);
      await sh("kubectl apply -f proxy.yaml");
      await sh("kubectl apply -f examples/subpool-platform.yaml");
      await sh("kubectl apply -f examples/subpool-internal.yaml");
      await sh("kubectl apply -f examples/site.yaml");
    },
    machinaImage: () =>
      kubectl(
        "-n",
        "kubefn-system",
        "get",
        "configmap",
        "kubefn-site-images",
        "-o",
        "jsonpath={.data.machina}",
      ),
    async kubefnLeft() {
      const names = await kubectl(
        "get",
        "crd,namespace,clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
        "-o",
        "name",
      );
      const crds = ["crawl.kubefn.dev", "subrelay.example.com", "unbounded-cloud.io"];
      return names
        .split("\n")
        .filter(
          (n) =>
            /\/(kubefn|subpool-)/.test(n) ||
            crds.some((c) => n.startsWith("customresourcedefinition") && n.endsWith(c)),
        );
    },
    async examplesReady() {
      return [
        await readyCondition("get", "proxy", "local", "-n", "default"),
        await readyCondition("get", "subpool", "demo-pool"),
        await readyCondition("get", "site", "lab"),
      ];
    },
  };
}
