/**
 * The release's pure parts: install.yaml against `kubectl kustomize infra/` (the command users ran
 * until now), image pinning, the SAM template's coverage of every setting (and cfn-lint on it), the
 * Lambda zip, the chart's values against the settings schema, and the version in package.json
 * against CHANGELOG.md and Chart.yaml.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import {
  hostObjects,
  installObjects,
  kustomizeObjects,
  type Manifest,
  objectKey,
  pinImages,
  relayObjects,
  toYamlStream,
} from "../../install/index.ts";
import type { Crd } from "../../scripts/release/crd-compat.ts";
import {
  defaultOf,
  parameterName,
  releaseTemplate,
  settingsFromSecretArns,
  sweepSchedules,
} from "../../scripts/release/sam-template.ts";
import { zip } from "../../scripts/release/zip.ts";
import { refuseIncompatibleCrds } from "../../scripts/release.ts";
import { settingsVariables } from "../../shared/app/settings.ts";
import { releaseVersion } from "../../shared/release.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
const devcluster = join(root, "infra/devcluster/bin/devcluster");

const byKey = (objects: Manifest[]) => new Map(objects.map((o) => [objectKey(o), o]));

describe("install.yaml", () => {
  it("holds exactly what `kubectl kustomize infra/` renders, kubefn images pinned to the version", async () => {
    const { stdout } = await run(devcluster, ["kubectl", "kustomize", join(root, "infra")], {
      maxBuffer: 1 << 26,
    });
    const kustomized = parseAllDocuments(stdout).map((d) => d.toJSON() as Manifest);
    pinImages(kustomized, version);
    const ours = kustomizeObjects(join(root, "infra"));
    pinImages(ours, version);
    expect(installObjects(root, version).slice(0, ours.length)).toEqual(ours);
    expect([...byKey(ours).keys()].sort()).toEqual([...byKey(kustomized).keys()].sort());
    // Whitespace inside strings aside: Go's YAML parser reads a folded scalar's more-indented line
    // (the admission policy's CEL) with one more line break than the YAML spec and this parser.
    const squeezed = (o: unknown) => JSON.parse(JSON.stringify(o).replace(/(\\n|\s)+/g, " "));
    for (const [key, o] of byKey(kustomized))
      expect(squeezed(byKey(ours).get(key)), key).toEqual(squeezed(o));
  }, 60_000);

  it("pins every ghcr.io/kubefn image and leaves others alone", () => {
    const objects = [
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "d" },
        spec: {
          template: {
            spec: {
              containers: [
                { name: "a", image: "ghcr.io/kubefn/relay:latest" },
                { name: "b", image: "ghcr.io/kubefn/kubefn@sha256:abc" },
                { name: "c", image: "docker.io/library/busybox:1.36" },
              ],
              initContainers: [{ name: "i", image: "ghcr.io/kubefn/relay" }],
            },
          },
        },
      },
    ] as unknown as Manifest[];
    expect(pinImages(objects, "1.2.3")).toEqual([
      "ghcr.io/kubefn/relay:1.2.3",
      "ghcr.io/kubefn/kubefn:1.2.3",
      "ghcr.io/kubefn/relay:1.2.3",
    ]);
    expect(JSON.stringify(objects)).toContain("docker.io/library/busybox:1.36");
  });

  it("runs no process; with host.yaml and relay.yaml, has no image left at :latest and every object once", () => {
    const cluster = installObjects(root, version);
    expect(cluster.filter((o) => o.kind === "Deployment")).toEqual([]);
    const objects = [...cluster, ...hostObjects(root, version), ...relayObjects(root, version)];
    const text = toYamlStream(objects, "x");
    expect(text).not.toMatch(/image: \S+:latest/);
    expect(text).toContain(`image: ghcr.io/kubefn/relay:${version}`);
    expect(text).toContain(`image: ghcr.io/kubefn/kubefn:${version}`);
    expect(new Set(objects.map(objectKey)).size).toBe(objects.length);
    expect(parseAllDocuments(text).map((d) => d.toJSON())).toEqual(objects);
  });

  it("refuses a kustomize feature it does not implement (the check can fail)", () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-kustomize-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "kustomization.yaml"), "resources: []\nimages:\n  - name: x\n    newTag: y\n");
    expect(() => kustomizeObjects(dir)).toThrow(/kustomize field\(s\) not supported: images/);
  });
});

describe("the release's SAM template", () => {
  const base = readFileSync(join(root, "infra/aws/template.yaml"), "utf8");
  const text = releaseTemplate(base, { codeUri: `kubefn-aws-${version}.zip`, version });
  // CloudFormation's short tags (!Ref, …) are read as the plain values they tag.
  const template = parse(text, { logLevel: "error" }) as {
    Parameters: Record<
      string,
      { Default?: string; NoEcho?: boolean; AllowedValues?: string[]; AllowedPattern?: string }
    >;
    Mappings: Record<string, Record<string, { Rate: string }>>;
    Resources: {
      Kubefn: { Properties: { CodeUri: string; Environment: { Variables: Record<string, unknown> } } };
      KubefnReconcile: {
        Properties: {
          CodeUri: string;
          Environment: { Variables: Record<string, unknown> };
          Events: { Sweep: { Properties: { Schedule: unknown } }; Queue: { Properties: unknown } };
        };
      };
      ReconcileQueue: { Properties: { RedrivePolicy: unknown } };
    };
  };
  const variables = template.Resources.Kubefn.Properties.Environment.Variables;
  const reconcileVariables = template.Resources.KubefnReconcile.Properties.Environment.Variables;

  it.each(Object.keys(settingsVariables))("sets %s from a Parameter", (variable) => {
    const viaSecret = settingsFromSecretArns[variable];
    const name = viaSecret ? parameterName(viaSecret) : parameterName(variable);
    expect(template.Parameters[name], name).toBeDefined();
    // The reconcile function reads every setting; the intake every one but the GCE provider's and
    // the secrets it has no use for.
    const value = reconcileVariables[viaSecret ?? variable] ?? variables[viaSecret ?? variable];
    // !Ref Name, or !If [Condition, !Ref Name, ""] for the GCE group.
    expect(JSON.stringify(value)).toContain(JSON.stringify(name));
    if (!viaSecret && !variable.startsWith("GCE_"))
      expect(JSON.stringify(variables[variable])).toContain(JSON.stringify(name));
  });

  it("gives the intake no GCE setting and the reconcile function no intake secret", () => {
    expect(Object.keys(variables).filter((v) => v.startsWith("GCE_"))).toEqual([]);
    expect(reconcileVariables).not.toHaveProperty("AUDIT_TOKEN_SECRET_ARN");
    expect(reconcileVariables).not.toHaveProperty("RELAY_SECRET_ARN");
  });

  it("defaults each generated Parameter to the setting's default, and hides credentials", () => {
    expect(template.Parameters.SiteImageRegistry?.Default).toBe(defaultOf("SITE_IMAGE_REGISTRY"));
    expect(template.Parameters.ProxyAllowedImages?.Default).toBe("");
    expect(template.Parameters.PassConcurrency?.Default).toBe("8");
    // Every credential is a Secrets Manager ARN, never a plaintext NoEcho Parameter nor a variable.
    for (const plain of ["AuditToken", "RelaySecret", "ApiToken", "OidcSigningKey", "StatusSealKey"])
      expect(template.Parameters).not.toHaveProperty(plain);
    expect(template.Parameters.ApiTokenSecretArn).toMatchObject({ Default: "" });
    expect(variables).toMatchObject({
      AUDIT_TOKEN_SECRET_ARN: "AuditTokenSecretArn",
      RELAY_SECRET_ARN: "RelaySecretArn",
      API_TOKEN_SECRET_ARN: "ApiTokenSecretArn",
      OIDC_SIGNING_KEY_SECRET_ARN: "OidcSigningKeySecretArn",
    });
    expect(reconcileVariables).toMatchObject({ OIDC_SIGNING_KEY_SECRET_ARN: "OidcSigningKeySecretArn" });
    for (const plain of ["AUDIT_TOKEN", "RELAY_SECRET", "API_TOKEN", "OIDC_SIGNING_KEY"]) {
      expect(variables).not.toHaveProperty(plain);
      expect(reconcileVariables).not.toHaveProperty(plain);
    }
  });

  it("bounds numeric settings as the schema does, so CloudFormation refuses a bad value", () => {
    expect(template.Parameters.PassConcurrency).toMatchObject({ Type: "Number", MinValue: 1, MaxValue: 256 });
    expect(template.Parameters.KubeTimeoutSeconds).toMatchObject({
      Type: "Number",
      MinValue: 0.1,
      MaxValue: 300,
    });
    const pattern = new RegExp(template.Parameters.ProxyResyncSeconds?.AllowedPattern ?? "^$");
    expect(["", "600", "ten"].map((v) => pattern.test(v))).toEqual([true, true, false]);
  });

  it("runs the sweep on the schedule of SweepPeriodSeconds", () => {
    expect(template.Parameters.SweepPeriodSeconds?.AllowedValues).toEqual(Object.keys(sweepSchedules));
    expect(template.Parameters.SweepPeriodSeconds?.Default).toBe("60");
    expect(template.Mappings.SweepSchedule?.["60"]?.Rate).toBe("rate(1 minute)");
    expect(template.Resources.KubefnReconcile.Properties.Events.Sweep.Properties.Schedule).toEqual([
      "SweepSchedule",
      "SweepPeriodSeconds",
      "Rate",
    ]);
    expect(template.Resources.Kubefn.Properties.CodeUri).toBe(`kubefn-aws-${version}.zip`);
    expect(template.Resources.KubefnReconcile.Properties.CodeUri).toBe(`kubefn-aws-${version}.zip`);
  });

  it("carries the reconcile queue, its redrive to the dead-letter queue and its event source with partial batch failures", () => {
    expect(variables.QUEUE_URL).toBe("ReconcileQueue");
    expect(reconcileVariables.QUEUE_URL).toBe("ReconcileQueue");
    expect(template.Resources.ReconcileQueue.Properties.RedrivePolicy).toEqual({
      deadLetterTargetArn: "DeadLetterQueue.Arn",
      maxReceiveCount: 5,
    });
    expect(template.Resources.KubefnReconcile.Properties.Events.Queue.Properties).toMatchObject({
      Queue: "ReconcileQueue.Arn",
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("passes cfn-lint", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-sam-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "template.yaml"), text);
    writeFileSync(
      join(dir, `kubefn-aws-${version}.zip`),
      zip([{ name: "index.mjs", data: Buffer.from("") }]),
    );
    const out = await run(
      join(root, ".tools/venv/bin/cfn-lint"),
      ["--format", "parseable", "template.yaml"],
      {
        cwd: dir,
      },
    ).then(
      (r) => r.stdout + r.stderr,
      (e: { stdout: string; stderr: string }) => e.stdout + e.stderr,
    );
    expect(out).toBe("");
  }, 120_000);
});

describe("the Lambda zip", () => {
  it("is a ZIP Python's zipfile reads back byte for byte", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-zip-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const files = [
      { name: "index.mjs", data: Buffer.from("export const handler = async () => 'ok';\n".repeat(50)) },
      { name: "index.mjs.map", data: Buffer.from(JSON.stringify({ version: 3 })) },
    ];
    writeFileSync(join(dir, "a.zip"), zip(files));
    await run("python3", ["-m", "zipfile", "-e", "a.zip", "out"], { cwd: dir });
    for (const f of files) expect(readFileSync(join(dir, "out", f.name))).toEqual(f.data);
    expect(zip(files)).toEqual(zip(files));
  });
});

describe("the chart's values", () => {
  const values = parse(readFileSync(join(root, "charts/kubefn/values.yaml"), "utf8")) as {
    settings: { values: Record<string, string> };
  };

  // The chart's settings are the in-cluster host's: where its default differs, the host's.
  const hostDefaults: Record<string, string> = { PASS_CONCURRENCY: "3" };

  it("list every setting, at the in-cluster host's default", () => {
    expect(Object.keys(values.settings.values).sort()).toEqual(Object.keys(settingsVariables).sort());
    for (const [name, value] of Object.entries(values.settings.values))
      expect(value, name).toBe(hostDefaults[name] ?? defaultOf(name));
    const host = parseNodeHostEnv({ KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBEFN_HOST: "0.0.0.0" }).settings;
    expect(String(host.passConcurrency)).toBe(hostDefaults.PASS_CONCURRENCY);
  });
});

describe("the version", () => {
  it("of the code (shared/release.ts) is package.json's", () => {
    expect(releaseVersion).toBe(version);
  });

  const changelog = readFileSync(join(root, "CHANGELOG.md"), "utf8");
  const sections = [...changelog.matchAll(/^## \[([^\]]+)\]/gm)].map((m) => m[1] as string);
  const released = sections.filter((s) => s !== "Unreleased");
  const newer = (a: string, b: string) => {
    const [x, y] = [a, b].map((v) => v.split(/[.-]/).map((n) => Number.parseInt(n, 10) || 0));
    for (let i = 0; i < 3; i++) if ((x?.[i] ?? 0) !== (y?.[i] ?? 0)) return (x?.[i] ?? 0) > (y?.[i] ?? 0);
    return false;
  };

  it("of package.json has a CHANGELOG entry, or is the next one and Unreleased is there", () => {
    const hasEntry = released.includes(version);
    const upcoming = sections.includes("Unreleased") && released.every((r) => newer(version, r));
    expect(hasEntry || upcoming, `CHANGELOG.md has no [${version}] (nor an Unreleased section for it)`).toBe(
      true,
    );
  });

  it("releases are listed newest first, each with its link, Unreleased first with its upgrade notes", () => {
    expect(released.every((r, i) => i === 0 || newer(released[i - 1] as string, r))).toBe(true);
    for (const s of sections) expect(changelog, s).toMatch(new RegExp(`^\\[${s}\\]: https://`, "m"));
    if (sections.includes("Unreleased")) {
      expect(sections[0]).toBe("Unreleased");
      expect(changelog.split("## [Unreleased]")[1]?.trimStart()).toMatch(/^### Upgrade notes/);
    }
  });

  it("is the chart's version and appVersion", () => {
    const chart = parse(readFileSync(join(root, "charts/kubefn/Chart.yaml"), "utf8")) as {
      version: string;
      appVersion: string;
    };
    expect([chart.version, chart.appVersion]).toEqual([version, version]);
  });

  it("has its CRDs recorded once it is released (the compatibility test's previous release)", () => {
    if (released.includes(version))
      expect(existsSync(join(root, `test/fixtures/crds/${version}`))).toBe(true);
  });
});

describe("the release's CRD gate", () => {
  const current = installObjects(root, version).filter(
    (o) => o.kind === "CustomResourceDefinition",
  ) as unknown as Crd[];

  it("passes the CRDs against the newest recorded release", () => {
    expect(() => refuseIncompatibleCrds(current)).not.toThrow();
  });

  it("refuses CRDs that drop a field of the newest recorded release", () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-crds-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const [first] = current as [Crd];
    const grown = structuredClone(first);
    const spec = grown.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.spec;
    Object.assign(spec?.properties ?? {}, { retired: { type: "string" } });
    mkdirSync(join(dir, "0.0.9"));
    mkdirSync(join(dir, "0.0.10"));
    writeFileSync(join(dir, "0.0.9/crd.yaml"), stringify(first));
    writeFileSync(join(dir, "0.0.10/crd.yaml"), stringify(grown));
    expect(() => refuseIncompatibleCrds(current, dir)).toThrow(
      `the CRDs break release 0.0.10's (add a new API version instead):\n${first.metadata.name} ${first.spec.versions[0]?.name} .spec.retired: field removed`,
    );
  });
});
