/**
 * scripts/release/publish.ts, the steps a tag's workflow runs (.github/workflows/release.yml):
 * the digest pinning of host.yaml, relay.yaml and the chart, and a tag's dry run end to end —
 * the release built, the plan printed (multi-arch builds, SBOMs, the chart's push, the
 * signatures), and the files it can make without a registry made.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import {
  multiArchBuilds,
  pinChartValues,
  pinManifest,
  pinWorkerConfig,
  publishPlan,
  readDigests,
} from "../../scripts/release/publish.ts";
import { helmBinary, release } from "../../scripts/release.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const { version } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string };
const kubefnDigest = `sha256:${"a".repeat(64)}`;
const relayDigest = `sha256:${"b".repeat(64)}`;
const forwardProxyDigest = `sha256:${"c".repeat(64)}`;
const digestsFile = `# kubefn ${version} images
ghcr.io/kubefn/kubefn:${version}  infra/host/Containerfile  ${kubefnDigest}
ghcr.io/kubefn/relay:${version}  infra/relay/Dockerfile  ${relayDigest}
ghcr.io/kubefn/forward-proxy:${version}  infra/forward-proxy/Containerfile  ${forwardProxyDigest}
`;
const digests = readDigests(digestsFile);

describe("the digests file", () => {
  it("is dist/images.txt's format: reference, Containerfile, digest", () => {
    expect([...digests]).toEqual([
      [`ghcr.io/kubefn/kubefn:${version}`, kubefnDigest],
      [`ghcr.io/kubefn/relay:${version}`, relayDigest],
      [`ghcr.io/kubefn/forward-proxy:${version}`, forwardProxyDigest],
    ]);
  });

  it("skips an image not pushed yet and refuses anything but a sha256 digest", () => {
    expect(readDigests("ghcr.io/kubefn/relay:1  infra/relay/Dockerfile  (not pushed)\n").size).toBe(0);
    expect(() => readDigests("ghcr.io/kubefn/relay:1  infra/relay/Dockerfile  latest\n")).toThrow(
      /no digest/,
    );
  });
});

describe("pinning", () => {
  it.each([
    ["image: ghcr.io/kubefn/relay:V", `image: ghcr.io/kubefn/relay:V@${relayDigest}`],
    ['  - image: "ghcr.io/kubefn/kubefn:V"', `  - image: "ghcr.io/kubefn/kubefn:V@${kubefnDigest}"`],
    ["image: ghcr.io/unbounded-cloud/machina:latest", "image: ghcr.io/unbounded-cloud/machina:latest"],
    // PROXY_POD_IMAGE in host.yaml's environment.
    [
      "              value: ghcr.io/kubefn/forward-proxy:V",
      `              value: ghcr.io/kubefn/forward-proxy:V@${forwardProxyDigest}`,
    ],
  ])("%s", (line, pinned) => {
    expect(pinManifest(line.replace("V", version), digests)).toBe(pinned.replace("V", version));
  });

  it("refuses a kubefn image it has no digest for", () => {
    expect(() => pinManifest("image: ghcr.io/kubefn/forward-proxy:9.9.9", digests)).toThrow(/no digest/);
  });

  it("sets the chart's two image digests and keeps its comments", async () => {
    const values = await readFile(join(root, "charts/kubefn/values.yaml"), "utf8");
    const pinned = pinChartValues(values, digests, version);
    const v = parseYaml(pinned) as {
      host: { image: { digest: string } };
      relay: { image: { digest: string } };
    };
    expect(v.host.image.digest).toBe(kubefnDigest);
    expect(v.relay.image.digest).toBe(relayDigest);
    expect(
      (v as unknown as { settings: { values: Record<string, string> } }).settings.values.PROXY_POD_IMAGE,
    ).toBe(`ghcr.io/kubefn/forward-proxy:${version}@${forwardProxyDigest}`);
    expect(pinned).toContain("# The in-cluster watch relay");
  });

  it("sets PROXY_POD_IMAGE in the Worker's [vars], once", () => {
    const pinnedRef = `ghcr.io/kubefn/forward-proxy:${version}@${forwardProxyDigest}`;
    const config = 'name = "kubefn"\n\n[vars]\nKUBE_SERVER = "https://kube.example.com"\n';
    const once = pinWorkerConfig(config, digests, version);
    expect(once).toContain(`[vars]\nPROXY_POD_IMAGE = "${pinnedRef}"\nKUBE_SERVER`);
    expect(pinWorkerConfig(once, digests, version)).toBe(once);
    expect(() => pinWorkerConfig('name = "kubefn"\n', digests, version)).toThrow(/no \[vars\]/);
  });

  it("builds every image for amd64 and arm64, pushed, its digest recorded", () => {
    const [argv] = multiArchBuilds(
      [
        {
          ref: "ghcr.io/kubefn/relay:1",
          repository: "ghcr.io/kubefn/relay",
          containerfile: "infra/relay/Dockerfile",
        },
      ],
      "dist/images",
    );
    expect(argv).toEqual(
      expect.arrayContaining([
        "--platform",
        "linux/amd64,linux/arm64",
        "--push",
        "--metadata-file",
        "dist/images/relay.json",
      ]),
    );
  });

  it("signs what it pushed by digest, never by tag", () => {
    const plan = publishPlan({
      builds: [{ ref: "ghcr.io/kubefn/relay:1", repository: "ghcr.io/kubefn/relay", containerfile: "x" }],
      digests: new Map([["ghcr.io/kubefn/relay:1", relayDigest]]),
      version: "1",
      out: "dist",
    });
    const signed = plan.filter((p) => p.step === "sign").map((p) => p.argv.at(-1));
    expect(signed).toEqual([
      `ghcr.io/kubefn/relay@${relayDigest}`,
      `ghcr.io/kubefn/relay@${relayDigest}`,
      "ghcr.io/kubefn/charts/kubefn@<digest helm push printed>",
      "dist/SHA256SUMS",
    ]);
  });
});

describe("a tag's dry run", () => {
  let out: string | undefined;
  afterAll(async () => {
    if (out) await rm(out, { recursive: true, force: true });
  });

  it("prints every command, pushes nothing, and pins dist/'s files and chart to the digests", async () => {
    out = await mkdtemp(join(tmpdir(), "kubefn-publish-"));
    await release({ out, worker: false });
    const sumsBefore = await readFile(join(out, "SHA256SUMS"), "utf8");
    await writeFile(join(out, "digests.txt"), digestsFile);
    const { stdout } = await run(
      process.execPath,
      [
        "--import",
        "tsx",
        "scripts/release/publish.ts",
        "--dry-run",
        "--out",
        out,
        "--digests",
        join(out, "digests.txt"),
      ],
      { cwd: root, maxBuffer: 1 << 24 },
    );
    const lines = stdout.trim().split("\n");
    const planned = lines.filter((l) => l.startsWith("# would run ")).map((l) => /\[(\w+)\]/.exec(l)?.[1]);
    expect([...new Set(planned)]).toEqual(["images", "sbom", "chart", "npm", "sign"]);
    expect(stdout).toContain(
      `npm publish ${join(out, "npm", `kubefn-${version}.tgz`)} --provenance --access public`,
    );
    await expect(readFile(join(out, "npm", `kubefn-${version}.tgz`))).resolves.toBeTruthy();
    expect(stdout).toContain("docker buildx build --platform linux/amd64,linux/arm64");
    expect(stdout).toContain(`syft scan registry:ghcr.io/kubefn/relay@${relayDigest} -o spdx-json=`);
    expect(stdout).toContain(`helm push ${join(out, `kubefn-${version}.tgz`)} oci://ghcr.io/kubefn/charts`);
    expect(stdout).toContain(`cosign sign --yes ghcr.io/kubefn/kubefn@${kubefnDigest}`);
    // The forward proxy the Managed example runs: built for both platforms, its SBOM, signed by digest.
    expect(stdout).toContain(
      `docker buildx build --platform linux/amd64,linux/arm64 --file infra/forward-proxy/Containerfile --tag ghcr.io/kubefn/forward-proxy:${version}`,
    );
    expect(stdout).toContain(`syft scan registry:ghcr.io/kubefn/forward-proxy@${forwardProxyDigest}`);
    expect(stdout).toContain(`cosign sign --yes ghcr.io/kubefn/forward-proxy@${forwardProxyDigest}`);
    expect(stdout).toContain(`cosign sign-blob --yes --bundle ${join(out, "SHA256SUMS.sigstore.json")}`);
    expect(lines.at(-1)).toMatch(/^# dry run: nothing pushed or signed/);

    // What it made locally: the manifests and the chart pinned, their checksums again.
    expect(await readFile(join(out, "relay.yaml"), "utf8")).toContain(
      `image: ghcr.io/kubefn/relay:${version}@${relayDigest}`,
    );
    expect(await readFile(join(out, "host.yaml"), "utf8")).toContain(
      `image: ghcr.io/kubefn/kubefn:${version}@${kubefnDigest}`,
    );
    // The forward proxy the pod provider runs when a Proxy names none: pinned on every platform.
    const forwardProxy = `ghcr.io/kubefn/forward-proxy:${version}@${forwardProxyDigest}`;
    expect(await readFile(join(out, "host.yaml"), "utf8")).toContain(`value: ${forwardProxy}`);
    // CloudFormation's short tags (!Ref, …) are read as the plain values they tag.
    const template = parseYaml(await readFile(join(out, "aws/template.yaml"), "utf8"), {
      logLevel: "error",
    }) as { Parameters: Record<string, { Default?: string }> };
    expect(template.Parameters.ProxyPodImage?.Default).toBe(forwardProxy);
    const rendered = await run(
      await helmBinary(),
      [
        "template",
        "kubefn",
        join(out, `kubefn-${version}.tgz`),
        "--kube-version",
        "1.30.0",
        "--set",
        "host.enabled=true,relay.enabled=true,relay.intakeUrl=https://kubefn.example.com/v1/events",
      ],
      { maxBuffer: 1 << 26 },
    );
    const images = parseAllDocuments(rendered.stdout)
      .map(
        (d) =>
          d.toJSON() as {
            kind?: string;
            spec?: { template?: { spec?: { containers?: { image: string }[] } } };
          },
      )
      .filter((o) => o?.kind === "Deployment")
      .flatMap((o) => o.spec?.template?.spec?.containers?.map((c) => c.image) ?? []);
    expect(images.sort()).toEqual([
      `ghcr.io/kubefn/kubefn:${version}@${kubefnDigest}`,
      `ghcr.io/kubefn/relay:${version}@${relayDigest}`,
    ]);
    const sums = await readFile(join(out, "SHA256SUMS"), "utf8");
    expect(sums).not.toBe(sumsBefore);
    const relaySum = /^([0-9a-f]{64}) {2}relay\.yaml$/m.exec(sums)?.[1];
    const { createHash } = await import("node:crypto");
    expect(relaySum).toBe(
      createHash("sha256")
        .update(await readFile(join(out, "relay.yaml")))
        .digest("hex"),
    );
  }, 120_000);
});

describe(".github/workflows/release.yml", () => {
  it("runs on a tag, with the OIDC identity cosign signs with, and its steps are the repository's scripts", async () => {
    const wf = parseYaml(await readFile(join(root, ".github/workflows/release.yml"), "utf8")) as {
      on: { push: { tags: string[] } };
      permissions: Record<string, string>;
      jobs: { release: { steps: Array<{ run?: string }> } };
    };
    expect(wf.on.push.tags).toEqual(["v*"]);
    expect(wf.permissions).toMatchObject({ "id-token": "write", packages: "write" });
    const runs = wf.jobs.release.steps.map((s) => s.run ?? "").join("\n");
    expect(runs).toContain("npm run release");
    expect(runs).toContain("node --import tsx scripts/release/publish.ts --out dist");
    for (const script of runs.match(/scripts\/[\w/.-]+\.(ts|sh)/g) ?? []) {
      await expect(readFile(join(root, script), "utf8"), script).resolves.toBeTruthy();
    }
  });
});
