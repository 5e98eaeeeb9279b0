/**
 * A ServiceAccount volume as the kubelet's AtomicWriter lays it out, for running the Node host
 * "in a Pod" on this machine: `token`, `ca.crt` and `namespace` are symlinks into `..data`, itself
 * a symlink to a timestamped directory that each update replaces in one rename. With
 * {@link podEnv} the host finds the API server as a Pod does (no KUBECONFIG,
 * KUBERNETES_SERVICE_HOST/PORT) and reads the volume through `KUBEFN_SERVICE_ACCOUNT_DIR`.
 */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./temp-dir.ts";

export interface ServiceAccountVolume {
  dir: string;
  /** Writes `token` (with the CA and namespace) as the kubelet does: one rename of `..data`. */
  publish(token: string): void;
  /** Makes the top-level symlinks; call once, after the first publish. */
  link(): void;
}

/** `caPem`: the CA, or a function giving it when the first token is published. */
export function serviceAccountVolume(
  caPem: string | (() => string),
  namespace = "kubefn-system",
): ServiceAccountVolume {
  const dir = tempDir("kubefn-sa-").path;
  let version = 0;
  return {
    dir,
    publish(token) {
      const name = `..${Date.now()}_${version++}`;
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, "token"), token);
      writeFileSync(join(dir, name, "ca.crt"), typeof caPem === "string" ? caPem : caPem());
      writeFileSync(join(dir, name, "namespace"), namespace);
      symlinkSync(name, join(dir, "..data_tmp"));
      renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
    },
    link() {
      for (const file of ["token", "ca.crt", "namespace"]) symlinkSync(join("..data", file), join(dir, file));
    },
  };
}

/** The Pod's environment for the host: the API server at `server` as KUBERNETES_SERVICE_*, no KUBECONFIG. */
export function podEnv(server: string, dir: string): Record<string, string> {
  const url = new URL(server);
  return {
    KUBECONFIG: "",
    KUBERNETES_SERVICE_HOST: url.hostname,
    KUBERNETES_SERVICE_PORT: url.port,
    KUBEFN_SERVICE_ACCOUNT_DIR: dir,
  };
}
