/**
 * The `kubefn` command (cli/kubefn.mjs, run as a user runs it, with the devcluster's kubeconfig in
 * KUBECONFIG) against the devcluster: `version`, `install` by platform (the cluster side alone, the
 * in-cluster host, the relay with its intake URL and a Secret it makes; SELF_USERNAMES rendered and
 * kept), `install --dry-run` (created/changed/unchanged per object, nothing written) and `doctor` (SubjectAccessReviews, admission policies, CRDs, and
 * whether intake receives events: a Node host as kubefn's ServiceAccount, fed by the relay
 * in-process, acknowledges doctor's intake canary; with the relay stopped nothing does), each
 * passing on a cluster set up as infra/ has it and failing, with what to do, where it is not.
 * Also the CRD upgrade path of docs/upgrading.md: the previous release's CRDs, then this one's,
 * server-side.
 */

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { bindTenantAccessClusterWide, installCrdsAndRbac } from "../../functions/node/install.ts";
import { defaultRelayKinds } from "../../infra/relay/main.ts";
import { createRelay, type Relay } from "../../infra/relay/relay.ts";
import { clientNodeWatchStream } from "../../infra/relay/watch-stream.ts";
import {
  crdsOf,
  inClusterIntakeUrl,
  installObjects,
  profileObjects,
  toYamlStream,
} from "../../install/index.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Log } from "../../shared/runtime/index.ts";
import { functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { clusterInfo, eventually, kubeConfig, kubectl, waitForAuditEvent } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

function kubefn(...args: string[]) {
  return outputOf(
    spawn(process.execPath, [join(root, "cli/kubefn.mjs"), ...args], {
      cwd: root,
      env: { ...process.env, KUBECONFIG: clusterInfo().kubeconfig },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
}

async function ok(args: string[], input?: string) {
  const r = await kubectl(args, input);
  expect(r.code, `kubectl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

const admin = () => createKube(createNodeTransport(loadKubeConfig({ file: clusterInfo().kubeconfig })));

beforeAll(async () => {
  await installCrdsAndRbac(admin());
});

// Every test that breaks something puts infra/ back as the Node host's installer has it.
afterAll(async () => {
  await installCrdsAndRbac(admin());
});

describe("kubefn version", () => {
  it("prints package.json's version and the CRD versions", async () => {
    const r = await kubefn("version");
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout).toBe(
      `kubefn ${version}\nCRDs: crawl.kubefn.dev/v1alpha1 subrelay.example.com/v1alpha1 unbounded-cloud.io/v1alpha3\n`,
    );
  });
});

describe("kubefn install --dry-run", () => {
  it("reports the cluster side unchanged on a cluster installed as infra/ has it, and writes nothing", async () => {
    const r = await kubefn("install", "--dry-run");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    const objects = installObjects(root, version);
    expect(lines).toContain("unchanged CustomResourceDefinition proxies.crawl.kubefn.dev");
    expect(lines).toContain("unchanged ValidatingAdmissionPolicy kubefn-writes-only-its-own");
    expect(lines).toContain(
      `would be 0 created, 0 changed, ${objects.length} unchanged (dry run: nothing was written)`,
    );
    // No process in the cluster side: nothing that would reconcile beside a Worker or a Lambda.
    expect(lines.filter((l) => / (Deployment|StatefulSet|DaemonSet) /.test(l))).toEqual([]);
    expect(lines).toContain(
      "kubefn's identities (SELF_USERNAMES, the cluster's admission policies): system:serviceaccount:kubefn-system:kubefn",
    );
  });

  it("with --platform node --relay: the host, the relay and its Secret to be created, nothing written", async () => {
    const r = await kubefn("install", "--platform", "node", "--relay", "--dry-run");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    const profile = profileObjects(root, version, { host: true, relay: { intakeUrl: inClusterIntakeUrl } });
    expect(lines).toContain("created   Deployment kubefn-system/kubefn");
    expect(lines).toContain("created   Deployment kubefn-system/kubefn-relay");
    expect(lines).toContain("created   Secret kubefn-system/kubefn-intake");
    const created = lines.filter((l) => l.startsWith("created")).length;
    expect(created).toBe(profile.length - installObjects(root, version).length + 1);
    expect(lines).toContain(
      `the relay posts to ${inClusterIntakeUrl}, signed with relay-secret of Secret kubefn-system/kubefn-intake (read it: kubectl -n kubefn-system get secret kubefn-intake -o jsonpath='{.data.relay-secret}' | base64 -d)`,
    );
    for (const args of [
      ["deployment", "kubefn-relay"],
      ["secret", "kubefn-intake"],
    ]) {
      expect((await kubectl(["-n", "kubefn-system", "get", ...args])).stderr).toMatch(/NotFound/);
    }
  });

  it("refuses a relay without an intake URL for a Worker, and says what is missing", async () => {
    const r = await kubefn("install", "--platform", "cloudflare", "--relay");
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^--relay needs --intake-url <kubefn's https:\/\/…\/v1\/events>\n/);
  });

  it("names the fields a drifted object would get back", async () => {
    await ok([
      "patch",
      "clusterrole",
      "kubefn-events",
      "--type=json",
      "-p",
      '[{"op":"replace","path":"/rules/0/verbs","value":["get","create"]}]',
    ]);
    onTestFinished(() => installCrdsAndRbac(admin()).then(() => undefined));
    const r = await kubefn("install", "--dry-run");
    expect(r.stdout).toContain("changed   ClusterRole kubefn-events: .rules[0].verbs\n");
    expect(await ok(["get", "clusterrole", "kubefn-events", "-o", "jsonpath={.rules[0].verbs}"])).toBe(
      '["get","create"]',
    );
  });
});

describe("kubefn install", () => {
  it("--platform cloudflare --relay: the relay posts to the Worker, signed with a Secret the installer made; a dry run then finds nothing to change", async () => {
    // What this adds to what the test setup installed: the relay and its Secret.
    const made = [
      ["-n", "kubefn-system", "deployment", "kubefn-relay"],
      ["-n", "kubefn-system", "serviceaccount", "kubefn-relay"],
      ["-n", "kubefn-system", "secret", "kubefn-intake"],
      ["clusterrolebinding", "kubefn-relay"],
      ["clusterrole", "kubefn-relay"],
    ];
    onTestFinished(async () => {
      for (const args of made) await kubectl(["delete", "--ignore-not-found", "--wait=false", ...args]);
    });
    const worker = "https://kubefn.example.workers.dev/v1/events";
    const args = ["install", "--platform", "cloudflare", "--relay", "--intake-url", worker];
    const r = await kubefn(...args);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^created {3}Deployment kubefn-system\/kubefn-relay$/m);
    expect(r.stdout).toMatch(/^created {3}Secret kubefn-system\/kubefn-intake$/m);
    expect(r.stdout).not.toMatch(/Deployment kubefn-system\/kubefn$/m);
    expect(r.stdout).toContain("| npx wrangler secret put RELAY_SECRET");
    const relay = JSON.parse(
      await ok(["-n", "kubefn-system", "get", "deployment", "kubefn-relay", "-o", "json"]),
    ) as { spec: { template: { spec: { containers: { image: string; env: { name: string }[] }[] } } } };
    const container = relay.spec.template.spec.containers[0];
    expect(container?.image).toBe(`ghcr.io/kubefn/relay:${version}`);
    expect(container?.env).toContainEqual({ name: "KUBEFN_INTAKE_URL", value: worker });
    const secret = Buffer.from(
      await ok([
        "-n",
        "kubefn-system",
        "get",
        "secret",
        "kubefn-intake",
        "-o",
        "jsonpath={.data.relay-secret}",
      ]),
      "base64",
    ).toString();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(r.stdout).not.toContain(secret);
    const again = await kubefn(...args, "--dry-run");
    expect(again.stdout).toMatch(
      /^would be 0 created, 0 changed, \d+ unchanged \(dry run: nothing was written\)$/m,
    );
    // Installing again keeps the secret the Worker was given.
    expect((await kubefn(...args)).code).toBe(0);
    expect(
      await ok([
        "-n",
        "kubefn-system",
        "get",
        "secret",
        "kubefn-intake",
        "-o",
        "jsonpath={.data.relay-secret}",
      ]),
    ).toBe(Buffer.from(secret).toString("base64"));
  });

  it("--platform node: the host's status seal key is made in kubefn-intake, not derived from a channel's secret, and kept by a later install (issue 30, Low)", async () => {
    const made = [
      ["-n", "kubefn-system", "deployment", "kubefn"],
      ["-n", "kubefn-system", "service", "kubefn"],
      ["-n", "kubefn-system", "poddisruptionbudget", "kubefn"],
      ["-n", "kubefn-system", "networkpolicy", "kubefn"],
      ["-n", "kubefn-system", "secret", "kubefn-intake"],
    ];
    onTestFinished(async () => {
      for (const args of made) await kubectl(["delete", "--ignore-not-found", "--wait=false", ...args]);
    });
    const sealKey = async () =>
      Buffer.from(
        await ok([
          "-n",
          "kubefn-system",
          "get",
          "secret",
          "kubefn-intake",
          "-o",
          "jsonpath={.data.status-seal-key}",
        ]),
        "base64",
      ).toString();
    const r = await kubefn("install", "--platform", "node");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^created {3}Secret kubefn-system\/kubefn-intake$/m);
    const key = await sealKey();
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(r.stdout).not.toContain(key);
    // The host reads it as its STATUS_SEAL_KEY.
    const host = JSON.parse(
      await ok(["-n", "kubefn-system", "get", "deployment", "kubefn", "-o", "json"]),
    ) as {
      spec: { template: { spec: { containers: { env?: unknown[] }[] } } };
    };
    expect(host.spec.template.spec.containers[0]?.env).toContainEqual({
      name: "KUBEFN_STATUS_SEAL_KEY",
      valueFrom: { secretKeyRef: { name: "kubefn-intake", key: "status-seal-key", optional: true } },
    });
    // A relay added later gets its own secret beside it; the seal key stays.
    const again = await kubefn("install", "--platform", "node", "--relay");
    expect(again.code, again.stderr).toBe(0);
    made.push(
      ["-n", "kubefn-system", "deployment", "kubefn-relay"],
      ["-n", "kubefn-system", "serviceaccount", "kubefn-relay"],
      ["clusterrolebinding", "kubefn-relay"],
      ["clusterrole", "kubefn-relay"],
    );
    expect(again.stdout).toMatch(/^changed {3}Secret kubefn-system\/kubefn-intake: \.data\.relay-secret$/m);
    expect(await sealKey()).toBe(key);
  });

  it("renders SELF_USERNAMES into every admission policy and the status writers, and a later install keeps them", async () => {
    onTestFinished(() => installCrdsAndRbac(admin()).then(() => undefined));
    const oidc = "kubefn-oidc:kubefn";
    const both = `system:serviceaccount:kubefn-system:kubefn,${oidc}`;
    const identities = async () => ({
      policies: (
        await ok([
          "get",
          "validatingadmissionpolicies",
          "-o",
          'jsonpath={range .items[*]}{.spec.matchConditions[?(@.name=="kubefn-identity")].expression}{"\\n"}{end}',
        ])
      )
        .split("\n")
        .filter(Boolean),
      writers: JSON.parse(
        await ok([
          "-n",
          "kubefn-system",
          "get",
          "configmap",
          "kubefn-status-writers",
          "-o",
          "jsonpath={.data}",
        ]),
      ) as Record<string, string>,
    });
    const given = await kubefn("install", "--self-usernames", both);
    expect(given.code, given.stderr).toBe(0);
    expect(given.stdout).toContain(
      `kubefn's identities (SELF_USERNAMES, SELF_USERNAMES as given): ${both.replace(",", ", ")}`,
    );
    const expression = `request.userInfo.username in ['system:serviceaccount:kubefn-system:kubefn', '${oidc}']`;
    const rendered = await identities();
    expect(rendered.policies.length).toBeGreaterThanOrEqual(4);
    expect(new Set(rendered.policies)).toEqual(new Set([expression]));
    // (The test setup's own entry, under a field manager of its own, stays beside them.)
    expect(rendered.writers).toMatchObject({
      kubefn: "system:serviceaccount:kubefn-system:kubefn",
      "kubefn-2": oidc,
    });
    // An upgrade's plain `kubefn install` does not undo them (it did: it force-applied the default).
    const plain = await kubefn("install");
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^\d+ created, 0 changed, \d+ unchanged$/m);
    expect(await identities()).toEqual(rendered);
    // The environment's SELF_USERNAMES, as every platform reads it, sets them back.
    const env = await outputOf(
      spawn(process.execPath, [join(root, "cli/kubefn.mjs"), "install"], {
        cwd: root,
        env: {
          ...process.env,
          KUBECONFIG: clusterInfo().kubeconfig,
          SELF_USERNAMES: "system:serviceaccount:kubefn-system:kubefn",
        },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    expect(env.code, env.stderr).toBe(0);
    expect(new Set((await identities()).policies)).toEqual(
      new Set(["request.userInfo.username in ['system:serviceaccount:kubefn-system:kubefn']"]),
    );
    const writers = (await identities()).writers;
    expect(writers).toMatchObject({ kubefn: "system:serviceaccount:kubefn-system:kubefn" });
    expect(writers).not.toHaveProperty("kubefn-2");
  });
});

describe("kubefn doctor", () => {
  // What delivers events to kubefn: its Node host (as kubefn-system/kubefn) and the relay,
  // list-watching the devcluster as install.yaml's relay does and posting signed batches to it.
  const secret = randomBytes(24).toString("hex");
  const quiet: Log = { info() {}, warn() {}, error: (m, f) => console.error(m, f) };
  let host: HostProcess | undefined;
  let relay: Relay | undefined;

  beforeAll(async () => {
    host = await startHost({
      KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig),
      KUBEFN_RELAY_SECRET: secret,
      KUBEFN_SWEEP_SECONDS: "3600",
    });
    relay = createRelay({
      kinds: defaultRelayKinds(),
      kube: admin(),
      stream: clientNodeWatchStream(kubeConfig(), { timeoutSeconds: 60 }),
      intakeUrl: `${host.url}/v1/events`,
      secret,
      batch: { maxEvents: 50, maxDelayMs: 200 },
      bufferSize: 1000,
      backoff: { baseMs: 200, maxMs: 1000 },
      log: quiet,
    });
    relay.start();
    await eventually(async () => (relay?.synced() ? true : undefined), { what: "relay synced" });
  }, 180_000);

  afterAll(async () => {
    await relay?.stop();
    expect(await host?.stop()).toBe(0);
  });

  it("passes every check on a cluster installed as infra/ has it", async () => {
    const r = await kubefn("doctor");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines.filter((l) => !l.startsWith("ok   ")).slice(0, -1)).toEqual([]);
    expect(lines).toContain(`ok   CRD proxies.crawl.kubefn.dev (v1alpha1) is kubefn ${version}'s`);
    expect(lines).toContain("ok   ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is installed");
    expect(lines).toContain(
      "ok   kubefn-system/kubefn may get,list,patch proxies.crawl.kubefn.dev cluster-wide",
    );
    expect(lines).toContain(
      "ok   kubefn-system/kubefn may get,list,create,patch,delete configmaps in kubefn-system",
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^ok {3}intake received the intake canary's creation from the relay \(\d+ s\)$/),
    );
    expect(lines.at(-1)).toMatch(/^all \d+ checks passed$/);
    // The canary is gone; intake's Event about it names it.
    expect(await ok(["-n", "kubefn-system", "get", "configmaps", "-o", "name"])).not.toMatch(/intake-canary/);
    const acks = await ok([
      "-n",
      "kubefn-system",
      "get",
      "events",
      "--field-selector",
      "reason=IntakeReceived",
      "-o",
      "jsonpath={.items[*].involvedObject.name}",
    ]);
    expect(acks).toMatch(/^kubefn-intake-canary-[0-9a-f]{8}/);
    // The audit path carries the canary too: the API server's audit webhook names it on create.
    const audited = await waitForAuditEvent(
      (e) => e.verb === "create" && (e.objectRef?.name ?? "").startsWith("kubefn-intake-canary-"),
    );
    expect(audited.objectRef).toMatchObject({ resource: "configmaps", namespace: "kubefn-system" });
  });

  it("fails a missing permission and says what to do", async () => {
    await ok([
      "patch",
      "clusterrole",
      "kubefn-events",
      "--type=json",
      "-p",
      '[{"op":"replace","path":"/rules/0/verbs","value":["get","create"]}]',
    ]);
    onTestFinished(() => installCrdsAndRbac(admin()).then(() => undefined));
    const r = await kubefn("doctor");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "fail kubefn-system/kubefn may not patch events.events.k8s.io cluster-wide — apply ClusterRole kubefn-events and its binding to kubefn-system/kubefn (kubefn install)\n",
    );
    expect(r.stdout).toMatch(/\n1 of \d+ checks failed\n$/);
  });

  it("fails a permission kubefn does not need (listing Secrets)", async () => {
    await ok([
      "create",
      "clusterrolebinding",
      "doctor-test-view-secrets",
      "--clusterrole=cluster-admin",
      "--serviceaccount=kubefn-system:kubefn",
    ]);
    onTestFinished(() =>
      kubectl(["delete", "clusterrolebinding", "doctor-test-view-secrets"]).then(() => undefined),
    );
    const r = await kubefn("doctor");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "fail kubefn-system/kubefn may also list,watch,patch,deletecollection secrets cluster-wide, more than it needs",
    );
  });

  it("fails when kubefn's token may read kubefn's own Secrets (kubefn-tenant bound cluster-wide, as clusterWideTenantAccess does)", async () => {
    await bindTenantAccessClusterWide(admin());
    onTestFinished(() => kubectl(["delete", "clusterrolebinding", "kubefn-tenant"]).then(() => undefined));
    const r = await kubefn("doctor");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "fail kubefn-system/kubefn may get secrets in kubefn-system, kubefn's own (its settings, the status seal key, the OIDC signing key, the intake's tokens)",
    );
    expect(r.stdout).toMatch(/\n1 of \d+ checks failed\n$/);
  });

  it("checks another identity with --as", async () => {
    const r = await kubefn("doctor", "--as", "kubefn-system/nobody");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "fail kubefn-system/nobody may not get,list,patch proxies.crawl.kubefn.dev cluster-wide",
    );
    expect(r.stdout).toContain(
      "fail system:serviceaccount:kubefn-system:nobody is not in ConfigMap kubefn-system/kubefn-status-writers",
    );
  });

  it("fails a missing admission policy binding", async () => {
    await ok(["delete", "validatingadmissionpolicybinding", "kubefn-writes-only-its-own"]);
    onTestFinished(() => installCrdsAndRbac(admin()).then(() => undefined));
    const r = await kubefn("doctor");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "fail ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is not installed: kubefn does not reconcile without it — kubefn install\n",
    );
  });

  it("fails a CRD whose schema is not this release's", async () => {
    const schema = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
    const fields = JSON.parse(
      await ok([
        "get",
        "crd",
        "sites.unbounded-cloud.io",
        "-o",
        `jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties}`,
      ]),
    ) as Record<string, unknown>;
    const field = Object.keys(fields)[0] as string;
    await ok([
      "patch",
      "crd",
      "sites.unbounded-cloud.io",
      "--type=json",
      "-p",
      JSON.stringify([{ op: "remove", path: `${schema}/${field}` }]),
    ]);
    onTestFinished(() => installCrdsAndRbac(admin()).then(() => undefined));
    const r = await kubefn("doctor");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      `fail CRD sites.unbounded-cloud.io v1alpha3 is not kubefn ${version}'s (an older or changed schema) — kubectl apply --server-side --force-conflicts -f dist/crds.yaml (docs/upgrading.md)\n`,
    );
  });

  // Last in this block: it stops the relay.
  it("fails when nothing delivers events to intake, and says what to do", async () => {
    await relay?.stop();
    relay = undefined;
    const r = await kubefn("doctor", "--intake-timeout", "3");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /\nfail intake did not acknowledge the intake canary ConfigMap kubefn-system\/kubefn-intake-canary-[0-9a-f]{8} within 3 s: nothing delivers the cluster's changes to kubefn — run the relay \(kubefn install --relay .*\) or point the API server's audit webhook at kubefn's \/v1\/events \(docs\/deploying\/README.md\)/,
    );
    expect(r.stdout).toMatch(/\n1 of \d+ checks failed\n$/);
  });
});

describe("the CRD upgrade path (docs/upgrading.md)", () => {
  it("applies the previous release's CRDs, then this release's, server-side", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-crds-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const crds = join(dir, "crds.yaml");
    writeFileSync(crds, toYamlStream(crdsOf(installObjects(root, version)), "test"));
    await ok(["apply", "--server-side", "--force-conflicts", "-f", join(root, "test/fixtures/crds/0.1.0")]);
    await ok(["apply", "--server-side", "--force-conflicts", "-f", crds]);
    await ok(["wait", "--for=condition=Established", "--timeout=60s", "-f", crds]);
    // Only the CRD lines matter here (the relay of the doctor tests is stopped).
    const r = await kubefn("doctor", "--intake-timeout", "0");
    expect(r.stdout.split("\n").filter((l) => l.includes(" CRD "))).toEqual([
      `ok   CRD proxies.crawl.kubefn.dev (v1alpha1) is kubefn ${version}'s`,
      `ok   CRD subpools.subrelay.example.com (v1alpha1) is kubefn ${version}'s`,
      `ok   CRD sites.unbounded-cloud.io (v1alpha3) is kubefn ${version}'s`,
      `ok   CRD machines.unbounded-cloud.io (v1alpha3) is kubefn ${version}'s`,
    ]);
  });
});
