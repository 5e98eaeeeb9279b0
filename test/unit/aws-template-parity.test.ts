/**
 * The two AWS templates — infra/aws/template.yaml, which docs/deploying/aws.md deploys from a
 * checkout, and the release's dist/aws/template.yaml, which scripts/release/sam-template.ts builds
 * from it — ask the same thing by the same Parameter: every Parameter of the first is the
 * release's, unchanged; what the release adds is one Parameter per kubefn setting the first leaves
 * at kubefn's default, named after the setting; no variable of a function is fed by a different
 * Parameter in the two; and deployed with every Parameter at its default, both give each function
 * the same environment for every variable the first sets.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  parameterName,
  releaseFunctions,
  releaseTemplate,
  settingsFromSecretArns,
} from "../../scripts/release/sam-template.ts";
import { settingsVariables } from "../../shared/app/settings.ts";
import { functionEnvironment } from "../support/sam-environment.ts";

const base = readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8");
const release = releaseTemplate(base, { codeUri: "kubefn-aws.zip", version: "0.0.0-test" });

interface Template {
  Parameters: Record<string, Record<string, unknown>>;
  Resources: Record<string, { Properties?: { Environment?: { Variables?: Record<string, unknown> } } }>;
}
// CloudFormation's short tags (!Ref, !If, …) are kept as the plain values they tag.
const plain = (text: string) => parse(text, { logLevel: "error" }) as Template;
const [baseT, releaseT] = [plain(base), plain(release)];

/** The Parameters a variable's value names (through !Ref, !If, !Sub …), sorted. */
function parametersOf(t: Template, value: unknown): string[] {
  const names = new Set<string>();
  const visit = (v: unknown): void => {
    if (typeof v === "string") {
      if (t.Parameters[v]) names.add(v);
      for (const m of v.matchAll(/\$\{([^}]+)\}/g)) if (m[1] && t.Parameters[m[1]]) names.add(m[1]);
    } else if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === "object") Object.values(v).forEach(visit);
  };
  visit(value);
  return [...names].sort();
}

const variablesOf = (t: Template, fn: string) =>
  t.Resources[fn]?.Properties?.Environment?.Variables ?? ({} as Record<string, unknown>);

const stack = {
  stackName: "kubefn",
  overrides: {},
  resources: {
    ReconcileQueue: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn-ReconcileQueue",
    StatusSealKey: "arn:aws:secretsmanager:us-east-1:123456789012:secret:kubefn-seal",
  },
};

describe("infra/aws/template.yaml and the release's template: one Parameter for one thing", () => {
  it("every Parameter of infra/aws is the release's, unchanged", () => {
    for (const [name, p] of Object.entries(baseT.Parameters)) {
      // The sweep period's Parameter is the release's own (its allowed values follow the schedules).
      if (name === parameterName("SWEEP_PERIOD_SECONDS")) continue;
      expect(releaseT.Parameters[name], name).toEqual(p);
    }
  });

  it("the release adds only one Parameter per kubefn setting, named after it, and none for a setting read from a secret's ARN", () => {
    const settings = new Map(Object.keys(settingsVariables).map((v) => [parameterName(v), v]));
    for (const name of Object.keys(releaseT.Parameters)) {
      if (baseT.Parameters[name]) continue;
      const variable = settings.get(name);
      expect(variable, `${name}: not a kubefn setting's Parameter`).toBeDefined();
      expect(settingsFromSecretArns[variable as string], `${name}: read from a secret's ARN`).toBeUndefined();
    }
  });

  it.each(releaseFunctions)("%s: no variable is fed by a different Parameter in the two", (fn) => {
    const [b, r] = [variablesOf(baseT, fn), variablesOf(releaseT, fn)];
    for (const [variable, value] of Object.entries(b)) {
      const fromBase = parametersOf(baseT, value);
      if (fromBase.length === 0) continue;
      expect(parametersOf(releaseT, r[variable]), `${fn} ${variable}`).toEqual(fromBase);
    }
    // And in the release, no two Parameters name one setting: `X` and `XSecretArn`.
    for (const [variable, viaSecret] of Object.entries(settingsFromSecretArns)) {
      expect(r, `${fn}: ${variable} beside ${viaSecret}`).not.toHaveProperty(variable);
      expect(releaseT.Parameters, `${parameterName(variable)} beside ${viaSecret}`).not.toHaveProperty(
        parameterName(variable),
      );
    }
  });

  it.each(releaseFunctions)(
    "%s: at every Parameter's default, the same environment for what infra/aws sets",
    (fn) => {
      const fromBase = functionEnvironment(base, fn, stack);
      const fromRelease = functionEnvironment(release, fn, stack);
      for (const [variable, value] of Object.entries(fromBase)) {
        expect(fromRelease[variable], `${fn} ${variable}`).toBe(value);
      }
    },
  );
});
