/**
 * The Workers bundle exactly as `wrangler deploy --dry-run --outdir <dir>` builds it, for the
 * bundle test and the bench (`npm run bench -- bundle`).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface WorkerBundle {
  code: string;
  bytes: number;
  /** `gzip -c worker.js | wc -c` (level 6, as gzip's default). */
  gzipBytes: number;
}

/** Builds worker.js in a temporary directory (removed afterwards) and measures it. */
export async function buildWorkerBundle(): Promise<WorkerBundle> {
  const dir = await mkdtemp(join(tmpdir(), "kubefn-worker-"));
  try {
    await promisify(execFile)(
      join(root, "node_modules/.bin/wrangler"),
      ["deploy", "--dry-run", "--outdir", dir, "--config", join(root, "wrangler.toml")],
      { cwd: root, env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
    );
    const code = await readFile(join(dir, "worker.js"), "utf8");
    return {
      code,
      bytes: Buffer.byteLength(code),
      gzipBytes: gzipSync(code, { level: 6 }).length,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
