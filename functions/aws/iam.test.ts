/**
 * The functions' own permissions, as infra/aws/template.yaml grants them to each (the intake
 * `Kubefn`, the reconcile function `KubefnReconcile`), enforced by moto's server with
 * authentication on: every call the queue makes is SigV4-signed with the function's keys (moto
 * recomputes the signature) and is one of the actions the template grants that function; an
 * action it does not grant is denied, and a request signed with the wrong secret is refused.
 *
 * Caveats: moto evaluates IAM policies by action only (outside S3 every request's resource is
 * `*`), so the statements' resources are widened to `*` for moto; that the template scopes them
 * to the reconcile queue is read from the template text in the first test. moto names a batch
 * call's action after the call (`sqs:SendMessageBatch`); AWS authorizes it as the single action
 * (`sqs:SendMessage`), so each granted action also grants its batch form here.
 */
import { readFileSync } from "node:fs";
import {
  AttachUserPolicyCommand,
  CreateAccessKeyCommand,
  CreatePolicyCommand,
  CreateUserCommand,
  IAMClient,
} from "@aws-sdk/client-iam";
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  ListSecretsCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { ListQueuesCommand, PurgeQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { parse } from "yaml";
import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { createHandler } from "./handler.ts";
import { consumeSqsEvent, sqsQueue } from "./queue.ts";

interface Statement {
  Effect: string;
  Action: string;
  Resource: unknown;
  Condition?: unknown;
}

// CloudFormation's short tags (!GetAtt, !Sub, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as { Resources: Record<string, { Properties?: { Policies?: ({ Statement?: Statement[] } | null)[] } }> };

const FUNCTIONS = ["Kubefn", "KubefnReconcile"] as const;
type Fn = (typeof FUNCTIONS)[number];

/** A function's policy statements for SQS, as the template writes them. */
const queueStatementsOf = (fn: Fn) =>
  (template.Resources[fn]?.Properties?.Policies ?? [])
    .flatMap((p) => p?.Statement ?? [])
    .filter((s) => s.Action.startsWith("sqs:"));

// The template again with the intrinsic functions a statement's resources use kept, to evaluate
// them for given Parameters as CloudFormation does.
const intrinsic = (name: string) => ({
  tag: `!${name}`,
  collection: "seq" as const,
  resolve: (seq: { toJSON(): unknown }) => ({ [`Fn::${name}`]: seq.toJSON() }),
});
const withIntrinsics = parse(
  readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"),
  {
    logLevel: "error",
    customTags: [
      { tag: "!Ref", resolve: (v: string) => ({ Ref: v }) },
      { tag: "!Condition", resolve: (v: string) => ({ Condition: v }) },
      intrinsic("If"),
      intrinsic("Not"),
      intrinsic("Equals"),
      intrinsic("Or"),
      intrinsic("And"),
    ] as never,
  },
) as {
  Conditions: Record<string, unknown>;
  Resources: Record<Fn, { Properties: { Policies: unknown[] } }> & Record<string, unknown>;
};
/** A function's Secrets Manager statements as CloudFormation resolves them for `parameters`. */
const secretStatementsFor = (fn: Fn, parameters: Record<string, string>): Statement[] =>
  (evaluate(withIntrinsics.Resources[fn].Properties.Policies, parameters) as { Statement: Statement[] }[])
    .flatMap((p) => p.Statement)
    .filter((s) => s.Action.startsWith("secretsmanager:"));

const NO_VALUE = Symbol("AWS::NoValue");
/**
 * Ref, Condition, Fn::If, Fn::Not, Fn::Equals, Fn::Or and Fn::And evaluated for `parameters`;
 * AWS::NoValue drops a list item.
 */
function evaluate(node: unknown, parameters: Record<string, string>): unknown {
  if (Array.isArray(node)) return node.map((n) => evaluate(n, parameters)).filter((v) => v !== NO_VALUE);
  if (typeof node !== "object" || node === null) return node;
  const entries = Object.entries(node);
  const [[fn, arg]] = entries as [[string, unknown]];
  if (entries.length !== 1 || !(fn === "Ref" || fn === "Condition" || fn.startsWith("Fn::")))
    return Object.fromEntries(entries.map(([k, v]) => [k, evaluate(v, parameters)]));
  const args = arg as unknown[];
  switch (fn) {
    case "Condition":
      return evaluate(withIntrinsics.Conditions[arg as string], parameters);
    case "Fn::Or":
      return args.some((a) => evaluate(a, parameters));
    case "Fn::And":
      return args.every((a) => evaluate(a, parameters));
    case "Ref":
      if (arg === "AWS::NoValue") return NO_VALUE;
      // A resource of the stack's own: its ARN once made.
      if ((arg as string) in withIntrinsics.Resources) return `made:${arg as string}`;
      return parameters[arg as string] ?? "";
    case "Fn::If":
      return evaluate(
        evaluate(withIntrinsics.Conditions[args[0] as string], parameters) ? args[1] : args[2],
        parameters,
      );
    case "Fn::Not":
      return !evaluate(args[0], parameters);
    case "Fn::Equals":
      return evaluate(args[0], parameters) === evaluate(args[1], parameters);
    default:
      throw new Error(`not evaluated here: ${fn}`);
  }
}

let moto: Moto;
let aws: KubefnAws;
type Keys = { accessKeyId: string; secretAccessKey: string };
/** The reconcile function's keys (the queue's sends and visibility changes). */
let keys: Keys;
const keysOf = {} as Record<Fn, Keys>;
let nothing: Keys;
let relaySecretArn: string;

/** An IAM user with `statements` attached, and its access keys. */
async function userWith(iam: IAMClient, name: string, statements: object[]): Promise<Keys> {
  await iam.send(new CreateUserCommand({ UserName: name }));
  const policy = await iam.send(
    new CreatePolicyCommand({
      PolicyName: name,
      PolicyDocument: JSON.stringify({ Version: "2012-10-17", Statement: statements }),
    }),
  );
  await iam.send(new AttachUserPolicyCommand({ UserName: name, PolicyArn: policy.Policy?.Arn }));
  const key = await iam.send(new CreateAccessKeyCommand({ UserName: name }));
  return {
    accessKeyId: key.AccessKey?.AccessKeyId ?? "",
    secretAccessKey: key.AccessKey?.SecretAccessKey ?? "",
  };
}

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
  const iam = new IAMClient({ region: REGION, endpoint: moto.endpoint });
  for (const fn of FUNCTIONS) {
    const statements = [
      ...queueStatementsOf(fn).map((s) => ({
        Effect: s.Effect,
        Action: [s.Action, `${s.Action}Batch`],
        Resource: "*",
      })),
      ...secretStatementsFor(fn, { KubeconfigSecretArn: "any" }).map((s) => ({
        Effect: s.Effect,
        Action: s.Action,
        Resource: "*",
      })),
    ];
    keysOf[fn] = await userWith(iam, fn, statements);
  }
  // A role granted nothing: the handler's calls must fail with it (the checks below can fail).
  nothing = await userWith(iam, "nothing", [
    { Effect: "Allow", Action: "sts:GetCallerIdentity", Resource: "*" },
  ]);
  keys = keysOf.KubefnReconcile;
  iam.destroy();
  const secrets = new SecretsManagerClient({ region: REGION, endpoint: moto.endpoint });
  relaySecretArn =
    (
      await secrets.send(
        new CreateSecretCommand({ Name: "kubefn/relay", SecretString: "relay-secret-0123456789" }),
      )
    ).ARN ?? "";
  secrets.destroy();
  // From here on moto checks every request's signature and the caller's policies.
  const on = await fetch(`${moto.endpoint}/moto-api/reset-auth`, { method: "POST", body: "0" });
  expect(on.status).toBe(200);
}, 30_000);
afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await moto?.close();
});

function sqsWith(credentials: typeof keys) {
  return new SQSClient({ region: REGION, endpoint: moto.endpoint, credentials });
}

function queue(credentials: typeof keys) {
  return sqsQueue({
    sqs: sqsWith(credentials),
    queueUrl: aws.queueUrl,
    clock: { now: () => new Date("2026-11-30T12:00:00Z") },
  });
}

/** Consumes one record as a retry; the warnings its visibility change logged. */
async function retryVisibility(credentials: typeof keys): Promise<Record<string, unknown>[]> {
  const warnings: Record<string, unknown>[] = [];
  const sqs = sqsWith(credentials);
  const record = {
    eventSource: "aws:sqs" as const,
    messageId: "m1",
    receiptHandle: "not-a-receipt-handle",
    body: JSON.stringify(message),
    attributes: { ApproximateReceiveCount: "1" },
  };
  const out = await consumeSqsEvent(
    { Records: [record] },
    { consume: async (d) => d.map(() => ({ ack: false, retryAfterSeconds: 5 })) },
    {
      sqs,
      queueUrl: aws.queueUrl,
      clock: { now: () => new Date() },
      log: { info() {}, error() {}, warn: (_m, f) => warnings.push(f ?? {}) },
    },
  );
  expect(out).toEqual({ batchItemFailures: [{ itemIdentifier: "m1" }] });
  sqs.destroy();
  return warnings;
}

/** moto answers a refused request in XML, which the JSON clients cannot parse: its HTTP status. */
function refusal(err: unknown): { status?: number } {
  return { status: (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode };
}

const message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };

describe("the function's IAM policy from infra/aws/template.yaml (moto, authentication on)", () => {
  it("the template grants the reconcile function SendMessage and ChangeMessageVisibility on the reconcile queue, the intake SendMessage only", () => {
    expect(queueStatementsOf("KubefnReconcile")).toEqual([
      { Effect: "Allow", Action: "sqs:SendMessage", Resource: "ReconcileQueue.Arn" },
      { Effect: "Allow", Action: "sqs:ChangeMessageVisibility", Resource: "ReconcileQueue.Arn" },
    ]);
    expect(queueStatementsOf("Kubefn")).toEqual([
      { Effect: "Allow", Action: "sqs:SendMessage", Resource: "ReconcileQueue.Arn" },
    ]);
  });

  it("the intake's keys may send to the queue but not change a message's visibility (it consumes nothing)", async () => {
    await expect(queue(keysOf.Kubefn).send([message])).resolves.toBeUndefined();
    expect(await retryVisibility(keysOf.Kubefn)).toEqual([
      expect.not.objectContaining({ code: expect.anything() }),
    ]);
    expect(await retryVisibility(keysOf.KubefnReconcile)).toEqual([
      expect.objectContaining({ code: "ReceiptHandleIsInvalid" }),
    ]);
  });

  it("allows what the queue does: send, delayed or not, and change a retried message's visibility", async () => {
    await expect(queue(keys).send([message])).resolves.toBeUndefined();
    await expect(queue(keys).send([message], 30)).resolves.toBeUndefined();
    // A record whose receipt handle SQS does not know: an authorized visibility change is
    // answered per entry (ReceiptHandleIsInvalid), a refused one not at all.
    expect(await retryVisibility(keys)).toEqual([
      expect.objectContaining({ code: "ReceiptHandleIsInvalid" }),
    ]);
    const forged = { ...keys, secretAccessKey: `${keys.secretAccessKey}x` };
    expect(await retryVisibility(forged)).toEqual([expect.not.objectContaining({ code: expect.anything() })]);
  });

  it("denies what the template does not grant (the check can fail)", async () => {
    const sqs = sqsWith(keys);
    expect(await sqs.send(new ListQueuesCommand({})).catch(refusal)).toEqual({ status: 403 });
    expect(await sqs.send(new PurgeQueueCommand({ QueueUrl: aws.queueUrl })).catch(refusal)).toEqual({
      status: 403,
    });
    sqs.destroy();
  });

  it("refuses a request signed with the wrong secret", async () => {
    // Change the last character to a different one (replacing it with a fixed "x" forged nothing
    // when the secret already ended in "x").
    const last = keys.secretAccessKey.slice(-1);
    const forged = {
      ...keys,
      secretAccessKey: `${keys.secretAccessKey.slice(0, -1)}${last === "x" ? "y" : "x"}`,
    };
    expect(forged.secretAccessKey).not.toBe(keys.secretAccessKey);
    const err = await queue(forged).send([message]).catch(refusal);
    expect(err).toEqual({ status: 403 });
    // The same call with the right secret goes through.
    await expect(queue(keys).send([message])).resolves.toBeUndefined();
  });
});

describe("each function reads only the secrets the template's Parameters name, and only those it needs", () => {
  // moto's default account.
  const arn = (name: string) => `arn:aws:secretsmanager:${REGION}:123456789012:secret:kubefn/${name}-AbCdEf`;
  const all = {
    KubeconfigSecretArn: arn("kubeconfig"),
    GceCredentialsSecretArn: arn("gce"),
    AuditTokenSecretArn: arn("audit"),
    RelaySecretArn: arn("relay"),
  };

  // Without StatusSealKeySecretArn the stack makes the seal's key (issue 30, Low): both read it.
  const sealKey = "made:StatusSealKey";
  it.each([
    ["Kubefn", { KubeconfigSecretArn: arn("kubeconfig") }, [arn("kubeconfig"), sealKey]],
    [
      "Kubefn",
      { KubeconfigSecretArn: arn("kubeconfig"), AuditTokenSecretArn: arn("audit") },
      [arn("kubeconfig"), arn("audit"), sealKey],
    ],
    ["Kubefn", all, [arn("kubeconfig"), arn("audit"), arn("relay"), sealKey]],
    [
      "Kubefn",
      { EksClusterName: "prod", EksTokenAuth: "true", AuditTokenSecretArn: arn("audit") },
      [arn("audit"), sealKey],
    ],
    ["Kubefn", { KubeGoogleCredentialsSecretArn: arn("kube-google") }, [arn("kube-google"), sealKey]],
    [
      "Kubefn",
      { KubeconfigSecretArn: arn("kubeconfig"), StatusSealKeySecretArn: arn("seal") },
      [arn("kubeconfig"), arn("seal")],
    ],
    ["KubefnReconcile", { KubeconfigSecretArn: arn("kubeconfig") }, [arn("kubeconfig"), sealKey]],
    ["KubefnReconcile", all, [arn("kubeconfig"), arn("gce"), sealKey]],
    [
      "KubefnReconcile",
      { KubeGoogleCredentialsSecretArn: arn("kube-google") },
      [arn("kube-google"), sealKey],
    ],
    [
      "KubefnReconcile",
      { KubeconfigSecretArn: arn("kubeconfig"), StatusSealKeySecretArn: arn("seal") },
      [arn("kubeconfig"), arn("seal")],
    ],
  ] as const)("%s: GetSecretValue on exactly the ARNs given: %j", (fn, parameters, expected) => {
    expect(secretStatementsFor(fn, parameters)).toEqual([
      { Effect: "Allow", Action: "secretsmanager:GetSecretValue", Resource: expected },
    ]);
  });

  // The public function's credential is its own (issue 30, Low): given IntakeKubeconfigSecretArn,
  // its role may not read the reconcile function's kubeconfig (kubefn's write identity), and the
  // reconcile function's role may not read the intake's.
  const own = { KubeconfigSecretArn: arn("kubeconfig"), IntakeKubeconfigSecretArn: arn("intake-kubeconfig") };
  const ownGoogle = {
    KubeGoogleCredentialsSecretArn: arn("kube-google"),
    IntakeKubeGoogleCredentialsSecretArn: arn("intake-kube-google"),
  };
  it.each([
    ["Kubefn", own, [arn("intake-kubeconfig"), sealKey]],
    [
      "Kubefn",
      { ...own, AuditTokenSecretArn: arn("audit") },
      [arn("intake-kubeconfig"), arn("audit"), sealKey],
    ],
    ["Kubefn", ownGoogle, [arn("intake-kube-google"), sealKey]],
    ["KubefnReconcile", own, [arn("kubeconfig"), sealKey]],
    ["KubefnReconcile", ownGoogle, [arn("kube-google"), sealKey]],
  ] as const)(
    "%s with the intake's own credential: GetSecretValue on exactly %j → %j",
    (fn, parameters, expected) => {
      expect(secretStatementsFor(fn, parameters)).toEqual([
        { Effect: "Allow", Action: "secretsmanager:GetSecretValue", Resource: expected },
      ]);
    },
  );

  it("the intake's role cannot read kubefn's kubeconfig once it has its own, and its environment names only its own", () => {
    const read = secretStatementsFor("Kubefn", own).flatMap((s) => s.Resource as string[]);
    expect(read).not.toContain(arn("kubeconfig"));
    const environmentOf = (fn: Fn) =>
      evaluate((withIntrinsics.Resources[fn].Properties as { Environment?: unknown }).Environment, own) as {
        Variables: Record<string, string>;
      };
    const env = environmentOf("Kubefn");
    expect(env.Variables.KUBECONFIG_SECRET_ARN).toBe(arn("intake-kubeconfig"));
    expect(JSON.stringify(env)).not.toContain(arn("kubeconfig"));
    const reconcileEnv = environmentOf("KubefnReconcile");
    expect(reconcileEnv.Variables.KUBECONFIG_SECRET_ARN).toBe(arn("kubeconfig"));
    expect(JSON.stringify(secretStatementsFor("KubefnReconcile", own))).not.toContain("intake-kubeconfig");
  });

  it.each(FUNCTIONS)("%s: with no secret named (EKS tokens), only the seal key the stack made", (fn) => {
    expect(secretStatementsFor(fn, { EksClusterName: "prod", EksTokenAuth: "true" })).toEqual([
      { Effect: "Allow", Action: "secretsmanager:GetSecretValue", Resource: [sealKey] },
    ]);
  });

  it("moto lets the function's keys read a secret and nothing else of Secrets Manager", async () => {
    const secrets = new SecretsManagerClient({
      region: REGION,
      endpoint: moto.endpoint,
      credentials: keysOf.Kubefn,
    });
    onTestFinished(() => secrets.destroy());
    const read = await secrets.send(new GetSecretValueCommand({ SecretId: relaySecretArn }));
    expect(read.SecretString).toBe("relay-secret-0123456789");
    expect(await secrets.send(new ListSecretsCommand({})).catch(refusal)).toEqual({ status: 403 });
    expect(
      await secrets
        .send(new PutSecretValueCommand({ SecretId: relaySecretArn, SecretString: "forged-by-the-function" }))
        .catch(refusal),
    ).toEqual({ status: 403 });
  });
});

describe("the handlers with each function's own keys (moto, authentication on)", () => {
  const fixture = (name: string): unknown =>
    JSON.parse(readFileSync(new URL(`../../test/fixtures/aws/${name}`, import.meta.url), "utf8"));
  const context = {
    functionName: "kubefn",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
    memoryLimitInMB: "512",
    awsRequestId: "4c9e5a8b-1d2f-4e3a-9b8c-7d6e5f4a3b2c",
    logGroupName: "/aws/lambda/kubefn",
    logStreamName: "2026/11/30/[$LATEST]0",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 30_000,
  };
  const silent = { info() {}, warn() {}, error() {} };
  /** The intake as deployed, its SDK clients signing with `credentials` (the default chain, from the environment). */
  function intakeWith(credentials: Keys) {
    vi.stubEnv("AWS_ACCESS_KEY_ID", credentials.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", credentials.secretAccessKey);
    onTestFinished(() => {
      for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
    });
    return createHandler({
      role: "intake",
      env: {
        AWS_REGION: REGION,
        QUEUE_URL: aws.queueUrl,
        KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
        AUDIT_TOKEN: "test-audit-token-0123456789",
      },
      endpoint: moto.endpoint,
      kube: () => new FakeKube(),
      log: silent,
      metrics: { count() {}, observe() {}, gauge() {} },
    });
  }

  it("the intake takes an audit batch and enqueues it with the intake's keys alone", async () => {
    const res = (await intakeWith(keysOf.Kubefn)(fixture("function-url-post-events.json"), context)) as {
      statusCode: number;
      body: string;
    };
    expect(res.statusCode).toBe(202);
    expect(JSON.parse(res.body)).toMatchObject({ enqueued: 1 });
  });

  it("the same batch with keys granted nothing is not enqueued (the check can fail)", async () => {
    const res = (await intakeWith(nothing)(fixture("function-url-post-events.json"), context)) as {
      statusCode: number;
    };
    expect(res.statusCode).toBeGreaterThanOrEqual(500);
  });

  it("the intake refuses a reconcile queue batch before reading anything: it runs no pass", async () => {
    const batch = { Records: [{ eventSource: "aws:sqs", messageId: "m1", receiptHandle: "r", body: "{}" }] };
    await expect(intakeWith(keysOf.Kubefn)(batch, context)).rejects.toThrow(
      /the intake function expects an HTTP, a kubefn\.reconcile event/,
    );
  });
});
