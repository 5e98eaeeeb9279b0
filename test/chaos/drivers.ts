/**
 * kubefn under chaos: the Node host as a child process (test/e2e/host.ts), with a kubeconfig for
 * the least-privileged ServiceAccount that points at the fault proxy instead of the API server.
 */
import { writeFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import type { Driver } from "./scenario.ts";

/**
 * A kubeconfig for `kubefn-system/kubefn` whose server is `server` (plain HTTP, e.g. the fault
 * proxy; client-node wants insecure-skip-tls-verify for an http:// server). Installs the CRDs and
 * RBAC on the way.
 */
export async function serviceAccountKubeconfigVia(adminKubeconfig: string, server: string): Promise<string> {
  const saFile = await functionsKubeconfig(adminKubeconfig);
  const sa = new KubeConfig();
  sa.loadFromFile(saFile);
  const token = sa.getCurrentUser()?.token;
  if (!token) throw new Error("the ServiceAccount kubeconfig has no token");
  const via = new KubeConfig();
  via.loadFromOptions({
    clusters: [{ name: "via", server, skipTLSVerify: true }],
    users: [{ name: "kubefn", token }],
    contexts: [{ name: "kubefn", cluster: "via", user: "kubefn" }],
    currentContext: "kubefn",
  });
  const file = `${saFile}.via`;
  writeFileSync(file, via.exportConfig());
  return file;
}

/** Environment of a Node host under chaos: quick sweeps, a 2 s client deadline. */
export function chaosHostEnv(kubeconfig: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    KUBECONFIG: kubeconfig,
    KUBEFN_SWEEP_SECONDS: "2",
    KUBEFN_PROXY_RESYNC_SECONDS: "60",
    KUBEFN_KUBE_TIMEOUT_SECONDS: "2",
    KUBEFN_CONCURRENCY: "8",
    ...extra,
  };
}

export async function startChaosHost(
  env: Record<string, string>,
): Promise<{ host: HostProcess; driver: Driver }> {
  const host = await startHost(env);
  return { host, driver: { passes: () => host.lines.filter((l) => l.msg === "pass").length } };
}
