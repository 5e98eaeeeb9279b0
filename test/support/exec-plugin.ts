/**
 * A kubeconfig whose user is the exec credential plugin test/fixtures/exec-plugin/mint-token.mjs
 * (a client.authentication.k8s.io/v1 plugin, as `aws eks get-token` is): each run mints a
 * 10-minute TokenRequest token for kubefn-system/kubefn through the admin's token, claims the
 * lifetime written in `lifetime` (seconds, re-read per run) and appends a line to `runs`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";

const plugin = fileURLToPath(new URL("../fixtures/exec-plugin/mint-token.mjs", import.meta.url));

export interface ExecPluginKubeconfig {
  /** The kubeconfig's path. */
  kubeconfig: string;
  /** The file the plugin reads the lifetime it claims from (seconds). */
  lifetime: string;
  /** How many times the plugin ran. */
  runs(): number;
}

/** Writes the CA, the plugin's files and the kubeconfig into `dir`. */
export function execPluginKubeconfig(
  dir: string,
  opts: { server: string; caPem: string; adminToken: string; label: string; lifetimeSeconds: number },
): ExecPluginKubeconfig {
  const runs = join(dir, "runs.log");
  const lifetime = join(dir, "lifetime");
  const caFile = join(dir, "ca.crt");
  writeFileSync(caFile, opts.caPem);
  writeFileSync(runs, "");
  writeFileSync(lifetime, String(opts.lifetimeSeconds));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "cluster", server: opts.server, caFile }],
    users: [
      {
        name: "kubefn",
        exec: {
          apiVersion: "client.authentication.k8s.io/v1",
          command: process.execPath,
          args: [plugin],
          env: [
            { name: "KUBE_SERVER", value: opts.server },
            { name: "KUBE_CA_FILE", value: caFile },
            { name: "KUBE_ADMIN_TOKEN", value: opts.adminToken },
            { name: "PLUGIN_LABEL", value: opts.label },
            { name: "PLUGIN_LIFETIME_FILE", value: lifetime },
            { name: "PLUGIN_RUNS", value: runs },
          ],
          interactiveMode: "Never",
        },
      },
    ],
    contexts: [{ name: "kubefn", cluster: "cluster", user: "kubefn" }],
    currentContext: "kubefn",
  });
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
  return {
    kubeconfig,
    lifetime,
    runs: () => readFileSync(runs, "utf8").split("\n").filter(Boolean).length,
  };
}
