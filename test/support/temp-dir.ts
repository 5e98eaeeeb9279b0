/**
 * Temporary directories that do not outlive the process: `tempDir` makes one under the OS temp
 * directory and removes it when `remove()` is called (success and failure paths, in a `finally`)
 * or, whatever is left, when the process exits — also through `process.exit` in a SIGINT/SIGTERM
 * handler, as `npm run bench` does. They may hold ServiceAccount tokens (kubeconfigs).
 *
 * A vitest worker is ended without an exit event: under the integration project's global setup
 * (`test/setup/devcluster.ts`) they are made inside the run's own root (`KUBEFN_TEMP_ROOT`),
 * which its teardown removes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The environment variable naming a directory to make them in, instead of the OS temp directory. */
export const tempRootEnv = "KUBEFN_TEMP_ROOT";

const live = new Set<string>();

function removeNow(dir: string): void {
  live.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once("exit", () => {
    for (const dir of [...live]) {
      try {
        removeNow(dir);
      } catch {
        // The process is exiting: nothing left to tell.
      }
    }
  });
}

export interface TempDir {
  path: string;
  /** Removes the directory and everything in it (idempotent). */
  remove(): void;
}

/** A fresh directory `<tmp>/<prefix>XXXXXX`, removed by `remove()` or at process exit. */
export function tempDir(prefix: string): TempDir {
  hookExit();
  const path = mkdtempSync(join(process.env[tempRootEnv] || tmpdir(), prefix));
  live.add(path);
  return { path, remove: () => removeNow(path) };
}
