/**
 * docs/deploying/aws.md walked literally from the release's artifacts (`npm run release` into
 * dist/), on a devcluster shaped like production (`--profile production`: the API server alone
 * over TLS with a private CA, its audit webhook with exactly the documented flags, so a batch waits
 * up to 30 s; ServiceAccount tokens of at most an hour; the token controller filling a
 * `kubernetes.io/service-account-token` Secret as any cluster's does).
 *
 * The page's commands run with `bash`, in order, in a directory laid out as the release (the
 * checkout's folders linked, dist/ built by scripts/release.ts) with `kubectl`, `kubefn` and `aws`
 * on the PATH; a command that fails fails the test. What targets the AWS account is substituted by
 * what it would deploy, with the same parameters:
 *
 * - `aws secretsmanager create-secret …` (steps 2 and "Secrets"): test/support/aws-cli.mjs makes
 *   the secret in moto's Secrets Manager (AWS_ENDPOINT_URL, as the AWS CLI honours it);
 * - steps 3 and 4 ("From a release, steps 3 and 4 are one": `sam deploy --template-file
 *   dist/aws/template.yaml --stack-name kubefn … --parameter-overrides …`): the stack's two
 *   functions are dist/aws/kubefn-aws-<v>.zip unpacked, each a process (test/support/
 *   lambda-runtime.mjs) with the handler and the environment dist/aws/template.yaml gives it for
 *   step 4's Parameters (test/support/sam-environment.ts evaluates the template), the AWS SDK
 *   pointed at moto's server; the ReconcileQueue and its dead-letter queue made in moto as the
 *   template makes them (test/support/moto.ts); the event source mapping a poller taking batches
 *   of 10 as Lambda's does (ReportBatchItemFailures); the Function URL a loopback HTTP server
 *   turning each request into the Function URL's event (payload 2.0) for the intake; the sweep
 *   rule (every minute) an invocation with EventBridge's Scheduled Event every few seconds;
 * - the API server's audit webhook points at that Function URL (its address fixed when the
 *   cluster starts) with the audit token the page's secret holds;
 * - `sam delete`: the processes stopped, moto's server with them.
 *
 * Beyond the page: ProbeAllowedCidrs for the loopback probe fixtures, the examples' Proxy
 * pointed at them. Then the examples' Proxy, SubPool and Site become Ready, reconciled by the
 * functions, and `kubefn uninstall` (while the stack runs, as the page says) leaves nothing.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { release } from "../../scripts/release.ts";
import { kubefnCli, unpackRelease, walkPage } from "../support/deploy-page.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { fencedBlocks } from "../support/markdown.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../support/moto.ts";
import { freePort } from "../support/oidc-issuer.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { functionEnvironment } from "../support/sam-environment.ts";
import type { TempDir } from "../support/temp-dir.ts";
import { eventually } from "./host.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const auditToken = `audit-${crypto.randomUUID()}`;
const scheduledEvent = JSON.parse(
  readFileSync(`${root}test/fixtures/aws/scheduled-event.json`, "utf8"),
) as unknown;

let cluster: OwnDevcluster;
let moto: Moto;
let aws: KubefnAws | undefined;
let work: TempDir;
let functionUrlPort: number;
let functionUrl: Server | undefined;
let running = false;
let poller: Promise<void> | undefined;
let sweeping: ReturnType<typeof setInterval> | undefined;
const failures: string[] = [];
const functions: Record<string, { child: ChildProcess; port: number; log: string }> = {};
let target: Target;
let forwardProxy: ForwardProxy;
const secretArns: Record<string, string> = {};

const walk = walkPage({
  page: "docs/deploying/aws.md",
  workDir: () => work.path,
  kubeconfig: () => cluster.kubeconfig,
  extraEnv: () => ({ ...TEST_CREDENTIALS, AWS_REGION: REGION, AWS_ENDPOINT_URL: moto.endpoint }),
});
const { sh, kubectl } = walk;
const page = walk.text;

/** The page's Deploy block: steps 1 to 4. */
const deployBlock = (): string => walk.blockWith("# 1. In the cluster");

/** The text of step `n` of the Deploy block (from its `# n.` comment to the next step's). */
function step(n: number): string {
  const block = deployBlock();
  const from = block.indexOf(`# ${n}. `);
  const to = block.indexOf(`# ${n + 1}. `);
  if (from < 0) throw new Error(`the Deploy block has no step ${n}`);
  return block.slice(from, to < 0 ? undefined : to);
}

/** Invokes one of the stack's functions with `event`; a thrown invocation throws here. */
async function invoke(name: string, event: unknown): Promise<unknown> {
  const fn = functions[name];
  if (!fn) throw new Error(`no function ${name}`);
  const res = await fetch(`http://127.0.0.1:${fn.port}/`, { method: "POST", body: JSON.stringify(event) });
  const answer = (await res.json()) as { result?: unknown; error?: string };
  if (answer.error) throw new Error(`${name}: ${answer.error}`);
  return answer.result;
}

/** One function of the stack: the zip's handler in a process with the template's environment. */
async function startFunction(name: string, codeDir: string, handler: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [`${root}test/support/lambda-runtime.mjs`, codeDir, handler], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      ...TEST_CREDENTIALS,
      AWS_REGION: REGION,
      AWS_ENDPOINT_URL: moto.endpoint,
      AWS_LAMBDA_FUNCTION_NAME: name,
      ...env,
    },
  });
  const fn = { child, port: 0, log: "" };
  functions[name] = fn;
  const append = (c: string) => {
    fn.log = (fn.log + c).slice(-200_000);
  };
  child.stdout?.setEncoding("utf8").on("data", append);
  child.stderr?.setEncoding("utf8").on("data", append);
  fn.port = await eventually(
    `${name} listening`,
    async () => {
      if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}):\n${fn.log}`);
      const m = /\{"listening":(\d+)\}/.exec(fn.log);
      return m ? Number(m[1]) : undefined;
    },
    30_000,
  );
}

/** The Function URL: each request as its payload 2.0 event, to the intake. */
function startFunctionUrl(port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://localhost");
      const headers = Object.fromEntries(
        Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(",") : String(v)]),
      );
      const event = {
        version: "2.0",
        routeKey: "$default",
        rawPath: url.pathname,
        rawQueryString: url.search.slice(1),
        headers,
        ...(url.search ? { queryStringParameters: Object.fromEntries(url.searchParams) } : {}),
        requestContext: {
          accountId: "anonymous",
          domainName: req.headers.host,
          http: { method: req.method, path: url.pathname, protocol: "HTTP/1.1", sourceIp: "127.0.0.1" },
          requestId: crypto.randomUUID(),
          routeKey: "$default",
          stage: "$default",
          timeEpoch: Date.now(),
        },
        body: Buffer.concat(chunks).toString("base64"),
        isBase64Encoded: true,
      };
      invoke("kubefn", event)
        .then((r) => {
          const out = r as {
            statusCode: number;
            headers?: Record<string, string>;
            body?: string;
            isBase64Encoded?: boolean;
          };
          res.writeHead(out.statusCode, out.headers ?? {});
          res.end(out.body ? Buffer.from(out.body, out.isBase64Encoded ? "base64" : "utf8") : undefined);
        })
        .catch((err: unknown) => {
          failures.push(String(err));
          res.writeHead(502).end();
        });
    });
  });
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(server)));
}

async function stopStack(): Promise<void> {
  running = false;
  if (sweeping) clearInterval(sweeping);
  sweeping = undefined;
  await poller;
  await new Promise<void>((resolve) => (functionUrl ? functionUrl.close(() => resolve()) : resolve()));
  functionUrl = undefined;
  for (const fn of Object.values(functions)) {
    if (fn.child.exitCode === null && fn.child.signalCode === null) {
      const exited = new Promise((resolve) => fn.child.once("exit", resolve));
      fn.child.kill("SIGTERM");
      const timer = setTimeout(() => fn.child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
  aws?.close();
  aws = undefined;
}

beforeAll(async () => {
  functionUrlPort = await freePort();
  cluster = await startOwnDevcluster([], {
    profile: "production",
    auditWebhook: {
      url: `http://127.0.0.1:${functionUrlPort}/v1/events`,
      token: auditToken,
      policy: `${root}infra/audit/policy.yaml`,
    },
  });
  moto = await startMoto();
  [target, forwardProxy] = await Promise.all([startHttpTarget(), startForwardProxy()]);
  work = unpackRelease(
    "kubefn-aws-page-",
    ["package.json", "node_modules", "scripts", "functions", "shared", "infra", "examples", "cli"],
    (dir) => ({
      kubefn: kubefnCli(dir),
      aws: `exec '${process.execPath}' '${root}test/support/aws-cli.mjs' "$@"`,
    }),
  );
  await release({ out: join(work.path, "dist"), worker: false });
}, 180_000);

afterAll(async () => {
  await stopStack();
  await target?.close();
  await forwardProxy?.close();
  await moto?.close();
  await cluster?.close();
  work?.remove();
}, 120_000);

describe("docs/deploying/aws.md from dist/, literally", () => {
  it("1. kubefn install --platform aws: the cluster side, no in-cluster host", async () => {
    const line = step(1)
      .split("\n")
      .find((l) => l.startsWith("kubefn install"));
    expect(line).toMatch(/^kubefn install --platform aws\s+#/);
    const out = await sh(line!);
    expect(out.stdout).toContain("created   ValidatingAdmissionPolicy kubefn-writes-only-its-own");
    expect(await kubectl("-n", "kubefn-system", "get", "deployments", "-o", "name")).toBe("");
  });

  it("2. a kubeconfig with a token that does not expire, in Secrets Manager", async () => {
    const out = await sh(step(2));
    const created = JSON.parse(out.stdout.slice(out.stdout.indexOf("{"))) as { ARN: string; Name: string };
    expect(created.Name).toBe("kubefn/kubeconfig");
    secretArns.KubeconfigSecretArn = created.ARN;
    const sm = new SecretsManagerClient({
      region: REGION,
      endpoint: moto.endpoint,
      credentials: {
        accessKeyId: TEST_CREDENTIALS.AWS_ACCESS_KEY_ID,
        secretAccessKey: TEST_CREDENTIALS.AWS_SECRET_ACCESS_KEY,
      },
    });
    const stored = await sm.send(new GetSecretValueCommand({ SecretId: created.ARN }));
    sm.destroy();
    const kc = parseYaml(Buffer.from(stored.SecretString ?? "", "base64").toString("utf8")) as {
      clusters: Array<{ cluster: { server: string; "certificate-authority-data"?: string } }>;
      users: Array<{ user: { token: string } }>;
    };
    expect(kc.clusters[0]?.cluster.server).toBe(cluster.server);
    expect(kc.clusters[0]?.cluster["certificate-authority-data"]).toBeTruthy();
    const claims = JSON.parse(
      Buffer.from(kc.users[0]!.user.token.split(".")[1]!, "base64url").toString("utf8"),
    ) as { sub: string; exp?: number };
    expect(claims.sub).toBe("system:serviceaccount:kubefn-system:kubefn");
    // The token controller's: no expiry.
    expect(claims.exp).toBeUndefined();
  }, 90_000);

  it("the audit token as a Secrets Manager secret, as the page says", async () => {
    const m =
      /`(aws secretsmanager\s+create-secret --name kubefn\/audit-token --secret-string) <≥16 chars>`/.exec(
        page,
      );
    expect(m, "the page names the command").not.toBeNull();
    const out = await sh(`${m![1]!.replace(/\s+/g, " ")} ${auditToken}`);
    secretArns.AuditTokenSecretArn = (JSON.parse(out.stdout) as { ARN: string }).ARN;
  });

  it("the intake's own identity: a kubeconfig for kubefn-intake, in a secret of its own", async () => {
    const block = fencedBlocks(page, "sh").find((b) => b.includes("kubefn-intake-lambda-token"));
    expect(block, "the page's block for the intake's identity").toBeDefined();
    const out = await sh(block!);
    const created = JSON.parse(out.stdout.slice(out.stdout.indexOf("{"))) as { ARN: string; Name: string };
    expect(created.Name).toBe("kubefn/intake-kubeconfig");
    secretArns.IntakeKubeconfigSecretArn = created.ARN;
    expect(block).toMatch(/add IntakeKubeconfigSecretArn=<[^>]*> to step 4's --parameter-overrides/);
    const sm = new SecretsManagerClient({
      region: REGION,
      endpoint: moto.endpoint,
      credentials: {
        accessKeyId: TEST_CREDENTIALS.AWS_ACCESS_KEY_ID,
        secretAccessKey: TEST_CREDENTIALS.AWS_SECRET_ACCESS_KEY,
      },
    });
    const stored = await sm.send(new GetSecretValueCommand({ SecretId: created.ARN }));
    sm.destroy();
    const kc = parseYaml(Buffer.from(stored.SecretString ?? "", "base64").toString("utf8")) as {
      users: Array<{ user: { token: string } }>;
    };
    const claims = JSON.parse(
      Buffer.from(kc.users[0]!.user.token.split(".")[1]!, "base64url").toString("utf8"),
    ) as { sub: string };
    expect(claims.sub).toBe("system:serviceaccount:kubefn-system:kubefn-intake");
  }, 90_000);

  it("3. and 4. from a release: the stack of dist/aws/template.yaml and its zip", async () => {
    const fromRelease =
      /`sam deploy --template-file (dist\/aws\/template\.yaml) --stack-name (\w+) --capabilities\s+CAPABILITY_IAM --parameter-overrides …`/.exec(
        page,
      );
    expect(fromRelease, "the page's command from a release").not.toBeNull();
    const [, templateFile, stackName] = fromRelease as unknown as [string, string, string];
    // Step 4's parameters: the kubeconfig's and the audit token's secrets (no relay here, no
    // alarm topic).
    const named = [...step(4).matchAll(/(\w+)=<[^>]*>/g)].map((m) => m[1]);
    expect(named).toEqual(["KubeconfigSecretArn", "AuditTokenSecretArn", "RelaySecretArn", "AlarmTopicArn"]);
    const overrides = {
      KubeconfigSecretArn: secretArns.KubeconfigSecretArn!,
      AuditTokenSecretArn: secretArns.AuditTokenSecretArn!,
      // The page's section on the intake's own identity adds it to step 4.
      IntakeKubeconfigSecretArn: secretArns.IntakeKubeconfigSecretArn!,
      ProbeAllowedCidrs: LOOPBACK_PROBE_CIDRS,
    };
    const templateText = readFileSync(join(work.path, templateFile), "utf8");
    const template = parseYaml(templateText, { logLevel: "silent" }) as {
      Resources: Record<string, { Properties: { CodeUri: string; Handler: string } }>;
    };
    aws = await createKubefnAws(moto.endpoint);
    // The status seal's key the stack makes (StatusSealKey, StatusSealKeySecretArn left empty).
    const sm = new SecretsManagerClient({
      region: REGION,
      endpoint: moto.endpoint,
      credentials: {
        accessKeyId: TEST_CREDENTIALS.AWS_ACCESS_KEY_ID,
        secretAccessKey: TEST_CREDENTIALS.AWS_SECRET_ACCESS_KEY,
      },
    });
    const sealKey = await sm.send(
      new CreateSecretCommand({
        Name: `${stackName}/status-seal-key`,
        SecretString: randomBytes(32).toString("hex"),
      }),
    );
    sm.destroy();
    const code = join(work.path, "lambda");
    const zipFile = join(work.path, "dist/aws", template.Resources.Kubefn!.Properties.CodeUri);
    execFileSync("python3", ["-m", "zipfile", "-e", zipFile, code]);
    for (const [id, name] of [
      ["Kubefn", stackName],
      ["KubefnReconcile", `${stackName}-reconcile`],
    ] as const) {
      const props = template.Resources[id]!.Properties;
      expect(props.CodeUri).toBe(template.Resources.Kubefn!.Properties.CodeUri);
      const env = functionEnvironment(templateText, id, {
        stackName,
        overrides,
        resources: { ReconcileQueue: aws.queueUrl, StatusSealKey: sealKey.ARN! },
      });
      // Each function is told only its own cluster credential.
      expect(env.KUBECONFIG_SECRET_ARN).toBe(
        id === "Kubefn" ? secretArns.IntakeKubeconfigSecretArn : secretArns.KubeconfigSecretArn,
      );
      await startFunction(name, code, props.Handler, env);
    }
    functionUrl = await startFunctionUrl(functionUrlPort);
    running = true;
    poller = (async () => {
      while (running) {
        try {
          await aws?.poll((event) => invoke(`${stackName}-reconcile`, event) as Promise<unknown>, 1);
        } catch (err) {
          if (running) failures.push(String(err));
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    })();
    sweeping = setInterval(() => {
      invoke(`${stackName}-reconcile`, {
        ...(scheduledEvent as object),
        time: new Date().toISOString(),
      }).catch((err: unknown) => failures.push(String(err)));
    }, 5000);
    expect((await fetch(`http://127.0.0.1:${functionUrlPort}/healthz`)).status).toBe(200);
  }, 90_000);

  it("the allow-list the page names admits the Site's components", async () => {
    await sh(walk.blockWith("kubefn-site-images"));
  });

  it("the examples' Proxy, SubPool and Site become Ready, reconciled by the stack's functions", async () => {
    await walk.applyExamples(target, forwardProxy);
    await eventually(
      "Proxy, SubPool and Site Ready",
      async () => {
        const got = await walk.examplesReady();
        if (got.every((s) => s === "True")) return got;
        // Not yet: look again in a second (each look is three kubectl processes).
        await new Promise((r) => setTimeout(r, 1000));
        throw new Error(`${got.join(",")}\n${failures.slice(-3).join("\n")}`);
      },
      150_000,
    );
    expect(forwardProxy.requests.length).toBeGreaterThan(0);
    const reconcileLog = functions["kubefn-reconcile"]?.log ?? "";
    expect(reconcileLog).toMatch(/"msg":"pass".*"key":"proxy\/default\/local"/);
    expect(reconcileLog).toMatch(/"msg":"pass".*"key":"site\/\/lab"/);
    // The audit webhook's batches reached the intake through the Function URL.
    expect(functions.kubefn?.log ?? "").toMatch(/"msg":"intake batch"/);
    // ... and it mapped them as kubefn-intake, refused nothing it needed.
    expect(functions.kubefn?.log ?? "").not.toMatch(/forbidden|"level":"error"/i);
    expect(failures).toEqual([]);
  }, 180_000);

  it("kubefn uninstall, while the stack runs, leaves nothing of kubefn; then sam delete", async () => {
    const m = /`(kubefn uninstall)` while the stack still runs/.exec(page);
    expect(m, "the page says how to remove kubefn").not.toBeNull();
    const out = await sh(m![1]!);
    const lines = out.stdout.trim().split("\n");
    expect(lines).toEqual(
      expect.arrayContaining([
        "deleted   Proxy default/local",
        "deleted   Site lab",
        "deleted   SubPool demo-pool",
      ]),
    );
    expect(lines.at(-1)).toMatch(/^nothing of kubefn is left: \d+ objects removed$/);
    expect(await walk.kubefnLeft()).toEqual([]);
    await stopStack();
  }, 180_000);
});
