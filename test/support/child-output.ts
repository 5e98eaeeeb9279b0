import type { ChildProcess } from "node:child_process";

/** What a finished child process printed, and its exit code (-1 when a signal ended it). */
export interface ChildOutput {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Collects a spawned child's stdout and stderr (spawned with pipes) until it closes; `input`, when
 * given, is written to its stdin, which is then closed.
 *
 * @example
 * const { code, stdout } = await outputOf(spawn(bin, ["kubectl", "get", "proxies"]), "");
 */
export function outputOf(child: ChildProcess, input?: string): Promise<ChildOutput> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
    });
    child.stderr?.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    if (input !== undefined) child.stdin?.end(input);
  });
}
