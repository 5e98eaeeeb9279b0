/**
 * The release's images step (`npm run release -- --images`, scripts/release/images.ts): every
 * kubefn image that host.yaml, relay.yaml and the rendered chart run has exactly one build entry, whose
 * Containerfile exists and whose tag is package.json's version; a dry run prints one build
 * command per image and writes dist/images.txt with the digests open. (Building and pushing need
 * a container runtime, which the tests do not have.)
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { hostObjects, relayObjects } from "../../install/index.ts";
import {
  buildCommands,
  digestFromMetadata,
  IMAGE_BUILDS,
  imageBuilds,
  imageRefs,
  imagesList,
  splitRef,
} from "../../scripts/release/images.ts";
import { chartObjects, helmBinary, releaseImages } from "../../scripts/release.ts";
import { defaultPodImage } from "../../shared/controllers/proxy/providers/kubernetes.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
let helm: string;

beforeAll(async () => {
  helm = await helmBinary();
}, 600_000);

describe("the release's images", () => {
  it("every image of host.yaml, relay.yaml and the chart has exactly one build entry, an existing Containerfile and the version", async () => {
    const inInstall = imageRefs([hostObjects(root, version), relayObjects(root, version)]);
    const inChart = imageRefs(await chartObjects(helm, ["--set", "host.enabled=true,relay.enabled=true"]));
    expect(inInstall.length).toBeGreaterThan(0);
    expect(inChart.length).toBeGreaterThan(0);
    const builds = await releaseImages(version, helm);
    for (const ref of [...inInstall, ...inChart]) {
      const entries = builds.filter((b) => b.ref === ref);
      expect(entries, ref).toHaveLength(1);
      const [entry] = entries;
      expect(existsSync(join(root, entry?.containerfile ?? "missing")), entry?.containerfile).toBe(true);
      expect(splitRef(ref).tag, ref).toBe(version);
    }
    expect(builds.map((b) => b.ref)).toEqual([
      // The Managed example's forward proxy: host.yaml's PROXY_POD_IMAGE, the default image of
      // the kubernetes provider's Pods.
      `ghcr.io/kubefn/forward-proxy:${version}`,
      `ghcr.io/kubefn/kubefn:${version}`,
      `ghcr.io/kubefn/relay:${version}`,
    ]);
    expect(`${defaultPodImage.slice(0, defaultPodImage.lastIndexOf(":"))}`).toBe(
      "ghcr.io/kubefn/forward-proxy",
    );
  });

  it("every Containerfile of the table exists", () => {
    for (const file of Object.values(IMAGE_BUILDS)) expect(existsSync(join(root, file)), file).toBe(true);
  });

  it.each([
    ["an image without a Containerfile", "ghcr.io/kubefn/crawler:0.1.0", "has no Containerfile"],
    ["an image of another version", "ghcr.io/kubefn/relay:0.0.9", "is not tagged with the release version"],
    ["an image by digest", "ghcr.io/kubefn/relay@sha256:abc", "is not tagged with the release version"],
  ])("refuses %s", (_, ref, message) => {
    expect(() => imageBuilds([ref], "0.1.0")).toThrow(message);
  });

  it("pushes only when asked, recording the digest with buildx; podman pushes apart", () => {
    const builds = imageBuilds(["ghcr.io/kubefn/relay:0.1.0"], "0.1.0");
    expect(buildCommands(builds, { tool: "docker", push: false, metadataDir: "/d" })).toEqual([
      [
        "docker",
        "buildx",
        "build",
        "--file",
        "infra/relay/Dockerfile",
        "--tag",
        "ghcr.io/kubefn/relay:0.1.0",
        ".",
      ],
    ]);
    expect(buildCommands(builds, { tool: "docker", push: true, metadataDir: "/d" })[0]).toEqual(
      expect.arrayContaining(["--push", "--metadata-file", "/d/relay.json"]),
    );
    expect(buildCommands(builds, { tool: "podman", push: true, metadataDir: "/d" })).toEqual([
      ["podman", "build", "--file", "infra/relay/Dockerfile", "--tag", "ghcr.io/kubefn/relay:0.1.0", "."],
      ["podman", "push", "ghcr.io/kubefn/relay:0.1.0"],
    ]);
  });

  it("lists each image with its digest once pushed, and a placeholder before", () => {
    const builds = imageBuilds(["ghcr.io/kubefn/relay:0.1.0"], "0.1.0");
    const digest = `sha256:${"a".repeat(64)}`;
    expect(imagesList(builds, "0.1.0").split("\n")[1]).toBe(
      "ghcr.io/kubefn/relay:0.1.0  infra/relay/Dockerfile  (not pushed)",
    );
    expect(imagesList(builds, "0.1.0", new Map([[builds[0]?.ref ?? "", digest]])).split("\n")[1]).toBe(
      `ghcr.io/kubefn/relay:0.1.0  infra/relay/Dockerfile  ${digest}`,
    );
    expect(digestFromMetadata(JSON.stringify({ "containerimage.digest": digest }))).toBe(digest);
    expect(digestFromMetadata("{}")).toBeUndefined();
  });

  it("npm run release -- --images (a dry run) prints the build commands and writes images.txt", async () => {
    const out = mkdtempSync(join(tmpdir(), "kubefn-images-"));
    onTestFinished(() => rmSync(out, { recursive: true, force: true }));
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", "scripts/release.ts", "--images", "--out", out],
      { cwd: root },
    );
    expect(stdout.split("\n").filter((l) => l.startsWith("docker "))).toEqual([
      `docker buildx build --file infra/forward-proxy/Containerfile --tag ghcr.io/kubefn/forward-proxy:${version} .`,
      `docker buildx build --file infra/host/Containerfile --tag ghcr.io/kubefn/kubefn:${version} .`,
      `docker buildx build --file infra/relay/Dockerfile --tag ghcr.io/kubefn/relay:${version} .`,
    ]);
    expect(stdout).toMatch(/^# dry run: /m);
    expect(readFileSync(join(out, "images.txt"), "utf8").trim().split("\n").slice(1)).toEqual([
      `ghcr.io/kubefn/forward-proxy:${version}  infra/forward-proxy/Containerfile  (not pushed)`,
      `ghcr.io/kubefn/kubefn:${version}  infra/host/Containerfile  (not pushed)`,
      `ghcr.io/kubefn/relay:${version}  infra/relay/Dockerfile  (not pushed)`,
    ]);
  }, 120_000);
});
