/**
 * test/support/temp-dir.ts: a bench's temporary directory (it holds ServiceAccount kubeconfigs)
 * is gone after every way its process can end — `remove()`, a normal exit, an uncaught error, and
 * SIGINT handled the way `npm run bench` handles it (`process.exit(130)` at once).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";

const module = fileURLToPath(new URL("../support/temp-dir.ts", import.meta.url));

/** Runs `body` in a child Node process after it made a tempDir; resolves with its path and exit. */
function child(body: string, signal?: NodeJS.Signals): Promise<{ path: string; code: number | null }> {
  const root = mkdtempSync(join(tmpdir(), "kubefn-temp-dir-test-"));
  onTestFinished(() => rmSync(root, { recursive: true, force: true }));
  const script = [
    `const { tempDir } = await import(${JSON.stringify(module)});`,
    `const { writeFileSync } = await import("node:fs");`,
    `const d = tempDir("bench-");`,
    `writeFileSync(d.path + "/peer.kubeconfig", "token", { mode: 0o600 });`,
    `process.once("SIGINT", () => process.exit(130));`,
    `console.log(d.path);`,
    body,
  ].join("\n");
  const proc = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    env: { ...process.env, KUBEFN_TEMP_ROOT: root },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stderr.setEncoding("utf8").on("data", (c: string) => {
    err += c;
  });
  return new Promise((resolve, reject) => {
    proc.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      if (signal && out.includes("\n")) proc.kill(signal);
    });
    proc.once("error", reject);
    proc.once("exit", (code) => {
      const path = out.split("\n")[0] ?? "";
      if (!path.startsWith(root)) reject(new Error(`no directory made under ${root}: ${out}${err}`));
      else resolve({ path, code });
    });
  });
}

describe("tempDir", () => {
  it("is removed by remove(), before the process ends", async () => {
    const { path, code } = await child(
      `d.remove(); if ((await import("node:fs")).existsSync(d.path)) process.exit(3);`,
    );
    expect(code).toBe(0);
    expect(existsSync(path)).toBe(false);
  });

  it("is removed at a normal exit", async () => {
    const { path, code } = await child("");
    expect(code).toBe(0);
    expect(existsSync(path)).toBe(false);
  });

  it("is removed when the process dies of an uncaught error", async () => {
    const { path, code } = await child(`throw new Error("bench failed");`);
    expect(code).toBe(1);
    expect(existsSync(path)).toBe(false);
  });

  it("is removed on SIGINT handled by process.exit, as npm run bench does", async () => {
    const { path, code } = await child("setInterval(() => {}, 1000);", "SIGINT");
    expect(code).toBe(130);
    expect(existsSync(path)).toBe(false);
  });

  it("stays while the process runs", async () => {
    const { path, code } = await child(
      `if (!(await import("node:fs")).existsSync(d.path + "/peer.kubeconfig")) process.exit(4);`,
    );
    expect(code).toBe(0);
    expect(existsSync(path)).toBe(false);
  });
});
