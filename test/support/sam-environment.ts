/**
 * What CloudFormation gives a function of a SAM template as its environment, for the deploy-page
 * walk: the template's `Environment.Variables` with its intrinsic functions evaluated against the
 * parameter overrides (`Ref`, `Fn::If` over the template's Conditions, `Fn::Sub`, `Fn::Join`,
 * `Fn::Equals`, `Fn::Not`, `Fn::And`, `Fn::Or`, `Condition`), each Parameter's default where
 * none is given, and the resources a test stands in for (e.g. the queue's URL for
 * `!Ref ReconcileQueue`). A construct it does not know throws: the walk fails rather than guess.
 */
import { isMap, isScalar, isSeq, type Node, parseDocument } from "yaml";

const NO_VALUE = Symbol("AWS::NoValue");
type Value = unknown;

/** The document as plain values, a tagged node (`!Ref x`) as `{ "!Ref": x }`. */
function plain(node: unknown): Value {
  if (node === null || node === undefined) return null;
  const n = node as Node;
  const tag = (n as { tag?: string }).tag;
  let v: Value;
  if (isScalar(n)) v = n.value;
  else if (isSeq(n)) v = n.items.map(plain);
  else if (isMap(n))
    v = Object.fromEntries(
      n.items.map((p) => [String(isScalar(p.key) ? p.key.value : p.key), plain(p.value)]),
    );
  else v = n;
  return tag?.startsWith("!") ? { [tag]: v } : v;
}

interface Template {
  Parameters: Record<string, { Type: string; Default?: string | number }>;
  Conditions: Record<string, Value>;
  Resources: Record<string, { Properties?: { Environment?: { Variables?: Record<string, Value> } } }>;
}

/** The options of a stack's evaluation: its name, its parameter overrides, the resources a test made. */
export interface StackOptions {
  stackName: string;
  overrides: Record<string, string>;
  /** `!Ref` of a resource the test made (its physical id or URL). */
  resources: Record<string, string>;
  /** `!GetAtt Resource.Attribute` of a resource the test made, keyed `Resource.Attribute`. */
  attributes?: Record<string, string>;
}

/**
 * The environment of `functionId` in `templateText` deployed as stack `stackName` with
 * `overrides`; `resources` gives `!Ref` of a resource the test made (its physical id or URL).
 */
export function functionEnvironment(
  templateText: string,
  functionId: string,
  opts: StackOptions,
): Record<string, string> {
  const { t, evaluate } = evaluator(templateText, opts);
  const variables = t.Resources[functionId]?.Properties?.Environment?.Variables;
  if (!variables) throw new Error(`${functionId} has no Environment.Variables`);
  const env = evaluate(variables) as Record<string, Value>;
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}

/**
 * The `Properties` of `resourceId` as CloudFormation hands them to the resource's service, with
 * `!GetAtt` of what `opts.attributes` gives; and whether its `Condition` holds.
 */
export function resourceProperties(
  templateText: string,
  resourceId: string,
  opts: StackOptions,
): { created: boolean; properties: Record<string, unknown> } {
  const { t, evaluate, condition } = evaluator(templateText, opts);
  const resource = t.Resources[resourceId] as { Condition?: string; Properties?: Value } | undefined;
  if (!resource) throw new Error(`the template has no resource ${resourceId}`);
  return {
    created: resource.Condition === undefined || condition(resource.Condition),
    properties: evaluate(resource.Properties ?? {}) as Record<string, unknown>,
  };
}

function evaluator(templateText: string, opts: StackOptions) {
  const t = plain(parseDocument(templateText, { logLevel: "silent" }).contents) as Template;
  for (const name of Object.keys(opts.overrides)) {
    if (!t.Parameters[name]) throw new Error(`the template has no Parameter ${name}`);
  }
  const ref = (name: string): Value => {
    if (name === "AWS::StackName") return opts.stackName;
    if (name === "AWS::NoValue") return NO_VALUE;
    if (name === "AWS::Region") return "us-east-1";
    const p = t.Parameters[name];
    if (p) {
      const v = String(opts.overrides[name] ?? p.Default ?? "");
      return p.Type === "CommaDelimitedList" || p.Type.startsWith("List<") ? v.split(",") : v;
    }
    const r = opts.resources[name];
    if (r !== undefined) return r;
    throw new Error(`!Ref ${name}: neither a Parameter nor a resource the test stands in for`);
  };
  const condition = (name: string): boolean => {
    const c = t.Conditions[name];
    if (c === undefined) throw new Error(`no Condition ${name}`);
    return Boolean(evaluate(c));
  };
  const evaluate = (v: Value): Value => {
    if (Array.isArray(v)) return v.map(evaluate).filter((x) => x !== NO_VALUE);
    if (!v || typeof v !== "object") return v;
    const entries = Object.entries(v as Record<string, Value>);
    const [key, arg] = entries[0] ?? [];
    if (entries.length !== 1 || !key || !(key.startsWith("!") || key === "Ref" || key.startsWith("Fn::"))) {
      return Object.fromEntries(entries.map(([k, x]) => [k, evaluate(x)]).filter(([, x]) => x !== NO_VALUE));
    }
    const fn = key.replace(/^!|^Fn::/, "");
    const args = arg as Value[];
    switch (fn) {
      case "Ref":
        return ref(String(arg));
      case "Condition":
        return condition(String(arg));
      case "If":
        return evaluate(condition(String(args[0])) ? args[1] : args[2]);
      case "Not":
        return !evaluate(args[0]);
      case "And":
        return args.every((a) => Boolean(evaluate(a)));
      case "Or":
        return args.some((a) => Boolean(evaluate(a)));
      case "Equals":
        return String(evaluate(args[0])) === String(evaluate(args[1]));
      case "Join":
        return (evaluate(args[1]) as Value[]).map(String).join(String(args[0]));
      case "GetAtt": {
        const at = Array.isArray(arg) ? arg.join(".") : String(arg);
        const v = opts.attributes?.[at];
        if (v === undefined) throw new Error(`!GetAtt ${at}: not an attribute the test stands in for`);
        return v;
      }
      case "Sub":
        return String(arg).replace(/\$\{([^}]+)\}/g, (_, name: string) => String(ref(name)));
      default:
        throw new Error(`${key}: not evaluated here`);
    }
  };
  return { t, evaluate, condition };
}
