/**
 * `cfn-lint` (PyPI, installed into .tools/venv by scripts/python-tools.sh, which `npm test` runs)
 * validates the AWS SAM template: resource types, properties, references and intrinsic functions.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const cfnLint = join(root, ".tools/venv/bin/cfn-lint");
const template = join(root, "infra/aws/template.yaml");

function lint(file: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cfnLint, ["--format", "parseable", file], (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

describe("infra/aws/template.yaml under cfn-lint", () => {
  it("has no errors or warnings", async () => {
    expect(await lint(template)).toEqual({ code: 0, out: "" });
  }, 120_000);

  it("catches a broken template (the check can fail)", async () => {
    const broken = readFileSync(template, "utf8").replace(
      "Type: AWS::Events::EventBus",
      "Type: AWS::Events::EventBuss",
    );
    expect(broken).not.toBe(readFileSync(template, "utf8"));
    const dir = mkdtempSync(join(tmpdir(), "cfn-lint-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "template.yaml");
    writeFileSync(file, broken);
    const result = await lint(file);
    expect(result.code).not.toBe(0);
    expect(result.out).toMatch(/E3006:Resource type 'AWS::Events::EventBuss' does not exist/);
  }, 120_000);
});
