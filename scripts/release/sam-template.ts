/**
 * The release's SAM template: infra/aws/template.yaml with a Parameter, and the environment
 * variable it feeds in both functions (the intake's without the GCE ones), for every kubefn setting (`settingsVariables`, which spreads the
 * operators' own), generated from the one settings schema so a new setting cannot be missed.
 *
 * A Parameter the base template already declares (with its hand-written description and
 * validation) is kept; the others are generated: `AUDIT_TOKEN` → `AuditToken`, default the base
 * template's own value where it sets one (`PROBE_SHARD_SIZE: "400"`), else the schema's default in
 * its environment form, NoEcho for tokens and secrets. An empty value means
 * unset (the function's environment parser treats "" as absent), so a generated Parameter left at
 * its default changes nothing.
 *
 * Caveats: values are validated by the function at cold start (it refuses to start and names the
 * variable), not by CloudFormation, except where the base template adds a pattern.
 */
import { type Document, isMap, parseDocument, Scalar, type YAMLMap } from "yaml";
import { settingsVariables } from "../../shared/app/settings.ts";

/** Settings the function reads from a secret named by an ARN Parameter instead of the value itself. */
export const settingsFromSecretArns: Record<string, string> = {
  GCE_CREDENTIALS: "GCE_CREDENTIALS_SECRET_ARN",
  AUDIT_TOKEN: "AUDIT_TOKEN_SECRET_ARN",
  RELAY_SECRET: "RELAY_SECRET_ARN",
  STATUS_SEAL_KEY: "STATUS_SEAL_KEY_SECRET_ARN",
  API_TOKEN: "API_TOKEN_SECRET_ARN",
  OIDC_SIGNING_KEY: "OIDC_SIGNING_KEY_SECRET_ARN",
};

/** Settings whose value is a credential: NoEcho, never shown by the console or DescribeStacks. */
export const secretSettings = new Set([
  "AUDIT_TOKEN",
  "RELAY_SECRET",
  "API_TOKEN",
  "STATUS_SEAL_KEY",
  "OIDC_SIGNING_KEY",
]);

/** The template's functions, each given every setting: the intake (`Kubefn`) and the reconcile function. */
export const releaseFunctions = ["Kubefn", "KubefnReconcile"] as const;

/** Settings the intake function is not given: the GCE provider's (it runs no pass). */
const intakeOmits = /^GCE_/;

/** The sweep periods a rate schedule can express, and the schedule of each. */
export const sweepSchedules: Record<string, string> = {
  "60": "rate(1 minute)",
  "120": "rate(2 minutes)",
  "300": "rate(5 minutes)",
  "600": "rate(10 minutes)",
  "900": "rate(15 minutes)",
  "1800": "rate(30 minutes)",
  "3600": "rate(60 minutes)",
};

/** `SUBPOOL_MAX_CPU` → `SubpoolMaxCpu`. */
export const parameterName = (variable: string): string =>
  variable
    .toLowerCase()
    .split("_")
    .map((w) => (w[0] ?? "").toUpperCase() + w.slice(1))
    .join("");

/** A setting's default in its environment form ("" when it has none). */
export function defaultOf(variable: string): string {
  const schema = (settingsVariables as Record<string, { safeParse(v: unknown): { data?: unknown } }>)[
    variable
  ];
  const value = schema?.safeParse(undefined).data;
  if (value === undefined) return "";
  return Array.isArray(value) ? value.join(",") : String(value);
}

interface ZodNode {
  _zod: { def: { type: string; innerType?: ZodNode; checks?: Array<{ _zod: { def: NumberCheck } }> } };
}
interface NumberCheck {
  check: string;
  value?: number;
  inclusive?: boolean;
}

/**
 * A setting's Parameter: a number with a default is a Number with the schema's inclusive bounds
 * (CloudFormation refuses a value outside them before anything is deployed); an optional number
 * is a String that is empty or numeric; anything else a String.
 */
export function generatedParameter(variable: string): Record<string, unknown> {
  const description = `${variable} (kubefn setting, shared/app/settings.ts). Empty: kubefn's default.`;
  let node = (settingsVariables as unknown as Record<string, ZodNode>)[variable];
  const wrapper = node?._zod.def.type;
  while (node?._zod.def.innerType) node = node._zod.def.innerType;
  const common = { Default: defaultOf(variable), ...(secretSettings.has(variable) ? { NoEcho: true } : {}) };
  if (node?._zod.def.type !== "number") return { Type: "String", ...common, Description: description };
  if (wrapper === "optional") {
    return {
      Type: "String",
      ...common,
      AllowedPattern: "^([0-9]+(\\.[0-9]+)?)?$",
      ConstraintDescription: `${variable} must be empty or a number`,
      Description: description,
    };
  }
  const bounds: Record<string, number> = {};
  for (const { _zod } of node._zod.def.checks ?? []) {
    const { check, value, inclusive } = _zod.def;
    if (value === undefined || !inclusive) continue;
    if (check === "greater_than") bounds.MinValue = value;
    if (check === "less_than") bounds.MaxValue = value;
  }
  return {
    Type: "Number",
    ...common,
    ...bounds,
    Description: `${variable} (kubefn setting, shared/app/settings.ts).`,
  };
}

const tagged = (tag: string, value: unknown, doc: Document) => {
  const node = doc.createNode(value);
  node.tag = tag;
  return node;
};

/**
 * The template for one release: `base` (infra/aws/template.yaml's text) with every setting's
 * Parameter and variable, the sweep schedule following `SweepPeriodSeconds`, and the code at
 * `codeUri` (the release's zip, beside the template).
 */
export function releaseTemplate(base: string, opts: { codeUri: string; version: string }): string {
  const doc = parseDocument(base, { logLevel: "error" });
  const parameters = doc.get("Parameters") as YAMLMap;
  if (!isMap(parameters)) throw new Error("base template: no Parameters");
  const secretArnsSet = new Set<string>();
  /** The base template's own Parameters, and the literal value it gives a generated one's variable. */
  const baseParameters = new Set(parameters.items.map((p) => String((p.key as Scalar).value)));
  const literals = new Map<string, string>();
  for (const fn of releaseFunctions) {
    const variables = doc.getIn(["Resources", fn, "Properties", "Environment", "Variables"]) as YAMLMap;
    if (!isMap(variables)) throw new Error(`base template: ${fn} has no variables`);
    for (const variable of Object.keys(settingsVariables)) {
      const viaSecret = settingsFromSecretArns[variable];
      if (viaSecret) {
        if (variables.has(viaSecret)) secretArnsSet.add(viaSecret);
        continue;
      }
      if (fn === "Kubefn" && intakeOmits.test(variable)) continue;
      const name = parameterName(variable);
      const literal = isLiteral(variables, variable) ? String(variables.get(variable)) : undefined;
      if (!parameters.has(name)) parameters.set(name, doc.createNode(generatedParameter(variable)));
      if (literal !== undefined && !baseParameters.has(name)) {
        // The base template's own value (PROBE_SHARD_SIZE "400" for the reconcile function) stays
        // the default: deployed at its defaults, the release runs as infra/aws does.
        const earlier = literals.get(name);
        if (earlier !== undefined && earlier !== literal)
          throw new Error(`base template: ${variable} is ${earlier} in one function, ${literal} in another`);
        literals.set(name, literal);
        (parameters.get(name) as YAMLMap).set("Default", literal);
      }
      if (!variables.has(variable) || literal !== undefined) {
        variables.set(variable, tagged("!Ref", name, doc));
      }
    }
    doc.setIn(["Resources", fn, "Properties", "CodeUri"], opts.codeUri);
  }
  for (const viaSecret of Object.values(settingsFromSecretArns))
    if (!secretArnsSet.has(viaSecret)) throw new Error(`base template: ${viaSecret} is not set`);
  const sweep = parameters.get(parameterName("SWEEP_PERIOD_SECONDS")) as YAMLMap;
  for (const bound of ["MinValue", "MaxValue"]) sweep.delete(bound);
  sweep.set("Type", "String");
  sweep.set("AllowedValues", doc.createNode(Object.keys(sweepSchedules)));
  sweep.set("Description", "Seconds between sweeps; the sweep rule's schedule follows it.");
  doc.setIn(
    ["Mappings", "SweepSchedule"],
    doc.createNode(
      Object.fromEntries(Object.entries(sweepSchedules).map(([s, rate]) => [s, { Rate: rate }])),
    ),
  );
  doc.setIn(
    ["Resources", "KubefnReconcile", "Properties", "Events", "Sweep", "Properties", "Schedule"],
    tagged("!FindInMap", ["SweepSchedule", tagged("!Ref", "SweepPeriodSeconds", doc), "Rate"], doc),
  );
  doc.set("Description", `${String(doc.get("Description")).trim()}\nRelease ${opts.version}.`);
  moveAfter(doc, "Mappings", "Parameters");
  return doc.toString({ lineWidth: 0 });
}

/** A variable set to a plain value in the base template (not a reference): the Parameter replaces it. */
function isLiteral(variables: YAMLMap, variable: string): boolean {
  const node = variables.get(variable, true);
  return node instanceof Scalar && !node.tag;
}

function moveAfter(doc: Document, key: string, after: string) {
  const map = doc.contents as YAMLMap;
  const i = map.items.findIndex((p) => (p.key as Scalar).value === key);
  const [pair] = map.items.splice(i, 1);
  const j = map.items.findIndex((p) => (p.key as Scalar).value === after);
  if (pair) map.items.splice(j + 1, 0, pair);
}
