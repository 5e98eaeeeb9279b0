/**
 * The Helm chart (charts/kubefn) with helm built from its Go module (scripts/helm.sh): `helm lint`,
 * its default render against install.yaml (the same objects: no process), the host and the relay
 * against host.yaml and relay.yaml, values.schema.json refusing bad values, and renders with every optional part
 * on, dry-run applied by the devcluster's API server (`kubectl apply --dry-run=server`), which runs
 * the schemas of every kind and the admission chain without storing anything. ServiceMonitor and
 * PrometheusRule need prometheus-operator's CRDs (vendored in test/fixtures/prometheus-operator):
 * installed for this file only and deleted after it.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { parseAllDocuments } from "yaml";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import {
  hostObjects,
  inClusterIntakeUrl,
  installObjects,
  type Manifest,
  objectKey,
  relayObjects,
} from "../../install/index.ts";
import { helmBinary } from "../../scripts/release.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { clusterInfo, kubectl } from "../setup/cluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const chart = join(root, "charts/kubefn");
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
const prometheusCrds = join(root, "test/fixtures/prometheus-operator");
let helm: string;
let kubeVersion: string;

async function runHelm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return promisify(execFile)(helm, args, { maxBuffer: 1 << 26 }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({
      code: e.code,
      stdout: e.stdout,
      stderr: e.stderr,
    }),
  );
}

async function render(...args: string[]): Promise<string> {
  const r = await runHelm(["template", "kubefn", chart, "--kube-version", kubeVersion, ...args]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

const objectsOf = (text: string) =>
  parseAllDocuments(text)
    .map((d) => d.toJSON() as Manifest | null)
    .filter((o): o is Manifest => Boolean(o?.kind));

/** Values that place the host (and, with an image of its own, the relay) as a shared cluster asks. */
const placement = {
  host: {
    image: { repository: "registry.example.com/mirror/kubefn", tag: "1.2.3" },
    nodeSelector: { "node-role.example.com/system": "true" },
    tolerations: [{ key: "dedicated", operator: "Equal", value: "system", effect: "NoSchedule" }],
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64"] }] },
          ],
        },
      },
    },
    priorityClassName: "system-cluster-critical",
  },
  imagePullSecrets: [{ name: "regcred" }],
};
/** The Pod spec fields `values` (host or relay) should render. */
const placementSpec = ({
  nodeSelector,
  tolerations,
  affinity,
  priorityClassName,
}: typeof placement.host) => ({
  nodeSelector,
  tolerations,
  affinity,
  priorityClassName,
});

beforeAll(async () => {
  helm = await helmBinary();
  kubeVersion = clusterInfo().version.replace(/^v/, "");
  // The Namespace and the kubefn objects the chart's dry-run updates (as the other files do).
  await installCrdsAndRbac(
    createKube(createNodeTransport(loadKubeConfig({ file: clusterInfo().kubeconfig }))),
  );
  const r = await kubectl(["apply", "--server-side", "-f", prometheusCrds]);
  expect(r.code, r.stderr).toBe(0);
  const w = await kubectl(["wait", "--for=condition=Established", "--timeout=60s", "-f", prometheusCrds]);
  expect(w.code, w.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await kubectl(["delete", "--ignore-not-found", "-f", prometheusCrds]);
});

describe("helm lint", () => {
  it("passes the chart", async () => {
    const r = await runHelm(["lint", "--strict", chart]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("1 chart(s) linted, 0 chart(s) failed");
  });

  it("fails a chart with a broken template (the check can fail)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-chart-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    cpSync(chart, join(dir, "kubefn"), { recursive: true, dereference: true });
    writeFileSync(
      join(dir, "kubefn/templates/broken.yaml"),
      "{{ .Values.relay.image.tag | nosuchfunction }}\n",
    );
    const r = await runHelm(["lint", "--strict", join(dir, "kubefn")]);
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/function "nosuchfunction" not defined/);
  });
});

describe("helm template", () => {
  it("renders, with its defaults, exactly the objects of install.yaml", async () => {
    const rendered = new Map(objectsOf(await render("--include-crds")).map((o) => [objectKey(o), o]));
    const expected = new Map(installObjects(root, version).map((o) => [objectKey(o), o]));
    expect([...rendered.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [key, o] of expected) expect(rendered.get(key), key).toEqual(o);
  });

  it("is accepted by the API server with its defaults (server-side dry run), and runs no process", async () => {
    const text = await render("--include-crds");
    expect(objectsOf(text).filter((o) => o.kind === "Deployment")).toEqual([]);
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], text);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^validatingadmissionpolicy\.admissionregistration\.k8s\.io\/kubefn-writes-only-its-own (unchanged|configured) \(server dry run\)$/m,
    );
  });

  it("renders the in-cluster host (host.enabled) and the relay (relay.enabled) as host.yaml and relay.yaml have them, the relay's Secret made", async () => {
    const keyed = (objects: Manifest[]) => new Map(objects.map((o) => [objectKey(o), o]));
    const cluster = new Set(installObjects(root, version).map(objectKey));
    const beyond = (text: string) => objectsOf(text).filter((o) => !cluster.has(objectKey(o)));

    const host = beyond(await render("--set", "host.enabled=true"));
    expect(keyed(host.filter((o) => o.kind !== "Secret"))).toEqual(keyed(hostObjects(root, version)));
    // The host's status seal key is made, never derived from a channel's secret (issue 30, Low).
    const hostSecret = host.find((o) => o.kind === "Secret") as
      | (Manifest & { data: Record<string, string> })
      | undefined;
    expect(hostSecret?.metadata).toMatchObject({ name: "kubefn-intake", namespace: "kubefn-system" });
    expect(Object.keys(hostSecret?.data ?? {})).toEqual(["status-seal-key"]);
    expect(Buffer.from(hostSecret?.data["status-seal-key"] ?? "", "base64").toString()).toMatch(
      /^[A-Za-z0-9]{64}$/,
    );

    const both = beyond(await render("--set", "host.enabled=true,relay.enabled=true"));
    const secret = both.find((o) => o.kind === "Secret") as
      | (Manifest & { data: Record<string, string> })
      | undefined;
    expect(secret?.metadata).toMatchObject({ name: "kubefn-intake", namespace: "kubefn-system" });
    expect(Buffer.from(secret?.data["relay-secret"] ?? "", "base64").toString()).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(Object.keys(secret?.data ?? {})).toEqual(["relay-secret", "status-seal-key"]);
    expect(keyed(both.filter((o) => o.kind !== "Secret"))).toEqual(
      keyed([...hostObjects(root, version), ...relayObjects(root, version, inClusterIntakeUrl)]),
    );

    const worker = "https://kubefn.example.workers.dev/v1/events";
    const relay = beyond(
      await render("--set", `relay.enabled=true,relay.intakeUrl=${worker},relay.secret.create=false`),
    );
    expect(keyed(relay)).toEqual(keyed(relayObjects(root, version, worker)));

    const r = await runHelm([
      "template",
      "kubefn",
      chart,
      "--kube-version",
      kubeVersion,
      "--set",
      "relay.enabled=true",
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("relay.enabled needs relay.intakeUrl");
  });

  it.each([
    ["a port out of range", ["--set", "relay.port=0"], "at '/relay/port'"],
    ["a misspelled setting", ["--set", "settings.values.PASS_CONCURENCY=3"], "'PASS_CONCURENCY' not allowed"],
    [
      "an intake URL without a scheme",
      ["--set", "relay.intakeUrl=kubefn.example.com/v1/events"],
      "at '/relay/intakeUrl'",
    ],
    ["a switch given as a string", ["--set-string", "host.enabled=yes"], "at '/host/enabled'"],
    ["an unknown top-level value", ["--set", "hots.enabled=true"], "'hots' not allowed"],
  ])("values.schema.json refuses %s, in helm template and helm lint", async (_, args, message) => {
    const template = await runHelm(["template", "kubefn", chart, "--kube-version", kubeVersion, ...args]);
    expect(template.code).not.toBe(0);
    expect(template.stderr).toContain(message);
    const lint = await runHelm(["lint", "--strict", chart, ...args]);
    expect(lint.code).not.toBe(0);
    expect(lint.stdout + lint.stderr).toContain(message);
  });

  it("is accepted with every optional part on: templated CRDs, settings, ServiceMonitor, PrometheusRule", async () => {
    const text = await render(
      "--skip-crds",
      "--set",
      "crds.templated=true,settings.create=true,serviceMonitor.enabled=true,prometheusRule.enabled=true",
      "--set",
      "host.enabled=true,relay.enabled=true",
      "--set",
      "settings.values.AUDIT_TOKEN=0123456789abcdefgh,settings.values.SUBPOOL_MAX_CPU=4",
      "--set",
      "relay.image.tag=9.9.9,serviceMonitor.labels.release=prometheus",
    );
    const kinds = objectsOf(text).map((o) => o.kind);
    expect(kinds).toEqual(expect.arrayContaining(["ServiceMonitor", "PrometheusRule", "Secret", "Service"]));
    const crdFiles = (await readdir("infra/crds")).filter((f) => f.endsWith(".yaml"));
    expect(kinds.filter((k) => k === "CustomResourceDefinition")).toHaveLength(crdFiles.length);
    expect(text).toContain('image: "ghcr.io/kubefn/relay:9.9.9"');
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], text);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("servicemonitor.monitoring.coreos.com/kubefn-relay created (server dry run)");
    // The host's /metrics is scraped too (its Service kubefn), not only the relay's.
    expect(r.stdout).toContain("servicemonitor.monitoring.coreos.com/kubefn created (server dry run)");
    expect(r.stdout).toContain("prometheusrule.monitoring.coreos.com/kubefn created (server dry run)");
    expect(r.stdout).toContain(
      "customresourcedefinition.apiextensions.k8s.io/proxies.crawl.kubefn.dev configured (server dry run)",
    );
  });

  it("places the host and the relay where a shared cluster asks (node selector, tolerations, affinity, priority, pull secrets, a mirror), accepted by the API server", async () => {
    const text = await render(
      "--set",
      "host.enabled=true,relay.enabled=true",
      "--set-json",
      `host=${JSON.stringify(placement.host)}`,
      "--set-json",
      `relay=${JSON.stringify({ ...placement.host, image: { repository: "registry.example.com/mirror/relay" } })}`,
      "--set-json",
      `imagePullSecrets=${JSON.stringify(placement.imagePullSecrets)}`,
    );
    type PodTemplate = {
      spec: { template: { spec: Record<string, unknown> & { containers: { image: string }[] } } };
    };
    const deployments = objectsOf(text).filter((o) => o.kind === "Deployment") as (Manifest & PodTemplate)[];
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(["kubefn", "kubefn-relay"]);
    for (const d of deployments) {
      expect(d.spec.template.spec, d.metadata.name).toMatchObject({
        ...placementSpec(placement.host),
        imagePullSecrets: placement.imagePullSecrets,
      });
    }
    expect(deployments.map((d) => d.spec.template.spec.containers[0]?.image).sort()).toEqual([
      "registry.example.com/mirror/kubefn:1.2.3",
      `registry.example.com/mirror/relay:${version}`,
    ]);
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], text);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^deployment\.apps\/kubefn (created|configured) \(server dry run\)$/m);
    // The check bites: a toleration the API server cannot take is refused.
    const bad = await render("--set-json", 'host={"enabled":true,"tolerations":[{"operator":"Sideways"}]}');
    const refused = await kubectl(["apply", "--dry-run=server", "-f", "-"], bad);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/toleration|operator/i);
  });

  it("refuses tenant access that would let kubefn's token read kubefn's own Secrets", async () => {
    const listed = await runHelm([
      "template",
      "kubefn",
      chart,
      "--kube-version",
      kubeVersion,
      "--set",
      "tenantNamespaces={team-a,kubefn-system}",
    ]);
    expect(listed.code).not.toBe(0);
    expect(listed.stderr).toMatch(/tenantNamespaces lists kubefn-system/);
    const clusterWide = await runHelm([
      "template",
      "kubefn",
      chart,
      "--kube-version",
      kubeVersion,
      "--set",
      "clusterWideTenantAccess=true,host.enabled=true",
    ]);
    expect(clusterWide.code).not.toBe(0);
    expect(clusterWide.stderr).toMatch(/clusterWideTenantAccess binds kubefn-tenant in kubefn-system too/);
    // Without the in-cluster host (kubefn on a Worker or Lambda), the explicit choice still renders.
    const text = await render("--set", "clusterWideTenantAccess=true,host.enabled=false");
    expect(
      objectsOf(text).filter((o) => o.kind === "ClusterRoleBinding" && o.metadata.name === "kubefn-tenant"),
    ).toHaveLength(1);
    expect(
      objectsOf(await render("--set", "tenantNamespaces={team-a}")).filter(
        (o) => o.kind === "RoleBinding" && o.metadata.name === "kubefn-tenant",
      ),
    ).toHaveLength(1);
  });

  it("is refused by the API server when a value the schema lets through is wrong (the check can fail)", async () => {
    const text = await render(
      "--set",
      "host.enabled=true,relay.enabled=true",
      "--set-string",
      "relay.resources.requests.cpu=lots",
    );
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], text);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/quantities must match/);
  });

  it("sets the host's PROXY_POD_IMAGE from settings.values (the released chart's, pinned), else the appVersion's forward proxy", async () => {
    const env = async (...args: string[]) => {
      const r = await runHelm([
        "template",
        "kubefn",
        chart,
        "--kube-version",
        kubeVersion,
        "--set",
        "host.enabled=true",
        ...args,
      ]);
      expect(r.code, r.stderr).toBe(0);
      const host = objectsOf(r.stdout).find((o) => o.kind === "Deployment" && o.metadata.name === "kubefn") as
        | (Manifest & {
            spec: {
              template: { spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } };
            };
          })
        | undefined;
      return host?.spec.template.spec.containers[0]?.env?.filter((e) => e.name === "PROXY_POD_IMAGE");
    };
    expect(await env()).toEqual([
      { name: "PROXY_POD_IMAGE", value: `ghcr.io/kubefn/forward-proxy:${version}` },
    ]);
    const pinned = `ghcr.io/kubefn/forward-proxy:${version}@sha256:${"b".repeat(64)}`;
    expect(await env("--set", `settings.values.PROXY_POD_IMAGE=${pinned}`)).toEqual([
      { name: "PROXY_POD_IMAGE", value: pinned },
    ]);
  });

  it("renders an in-cluster host of files/host/ pinned to the version, with the settings when on, and the OTLP endpoint when set", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-chart-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const copy = join(dir, "kubefn");
    cpSync(chart, copy, { recursive: true, dereference: true });
    const host = `# a host as infra/host/ would have it
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kubefn
  namespace: kubefn-system
spec:
  selector:
    matchLabels: { app.kubernetes.io/name: kubefn }
  template:
    metadata:
      labels: { app.kubernetes.io/name: kubefn }
    spec:
      serviceAccountName: kubefn
      containers:
        - name: kubefn
          image: ghcr.io/kubefn/kubefn:latest
        - name: sidecar
          image: docker.io/library/busybox:1.36
---
apiVersion: v1
kind: Service
metadata:
  name: kubefn
  namespace: kubefn-system
spec:
  selector: { app.kubernetes.io/name: kubefn }
  ports: [{ name: http, port: 8080 }]
`;
    // Replace the release's own host (infra/host/) with this one, whose every field the test knows.
    rmSync(join(copy, "files/host"), { recursive: true, force: true });
    mkdirSync(join(copy, "files/host"));
    writeFileSync(join(copy, "files/host/deployment.yaml"), host);
    const renderCopy = async (...args: string[]) => {
      const r = await runHelm([
        "template",
        "kubefn",
        copy,
        "--kube-version",
        kubeVersion,
        "--set",
        "host.enabled=true",
        ...args,
      ]);
      expect(r.code, r.stderr).toBe(0);
      return objectsOf(r.stdout);
    };
    const deployment = (objects: Manifest[]) =>
      objects.find((o) => o.kind === "Deployment" && o.metadata.name === "kubefn") as
        | (Manifest & { spec: { template: { spec: { containers: Array<Record<string, unknown>> } } } })
        | undefined;

    const plain = await renderCopy();
    expect(plain.some((o) => o.kind === "Service" && o.metadata.name === "kubefn")).toBe(true);
    expect(deployment(plain)?.spec.template.spec.containers).toEqual([
      { name: "kubefn", image: `ghcr.io/kubefn/kubefn:${version}` },
      { name: "sidecar", image: "docker.io/library/busybox:1.36" },
    ]);
    const withSettings = await renderCopy("--set", "settings.create=true,host.image.tag=1.2.3");
    expect(deployment(withSettings)?.spec.template.spec.containers[0]).toEqual({
      name: "kubefn",
      image: "ghcr.io/kubefn/kubefn:1.2.3",
      envFrom: [{ configMapRef: { name: "kubefn-settings" } }, { secretRef: { name: "kubefn-settings" } }],
    });
    // A settings change rolls the host (envFrom is read at container start): the Pod template
    // carries the settings' digest, which moves with a value and stays with none changed.
    type Template = { metadata?: { annotations?: Record<string, string> } };
    const digest = (objects: Manifest[]) =>
      (deployment(objects)?.spec.template as Template | undefined)?.metadata?.annotations?.[
        "checksum/settings"
      ];
    const before = digest(withSettings);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    expect(
      digest(await renderCopy("--set", "settings.create=true,host.image.tag=1.2.3,host.replicas=2")),
    ).toBe(before);
    expect(
      digest(await renderCopy("--set", "settings.create=true,settings.values.SUBPOOL_MAX_CPU=8")),
    ).not.toBe(before);
    expect(
      digest(
        await renderCopy("--set", "settings.create=true,settings.values.AUDIT_TOKEN=0123456789abcdefrotated"),
      ),
    ).not.toBe(before);
    expect(digest(plain)).toBeUndefined();
    const annotated = deployment(
      await renderCopy(
        "--set",
        "settings.create=true",
        "--set-json",
        'host.podAnnotations={"reloader.stakater.com/auto":"true"}',
      ),
    )?.spec.template as Template | undefined;
    expect(annotated?.metadata?.annotations).toEqual({
      "reloader.stakater.com/auto": "true",
      "checksum/settings": before,
    });
    const withOtel = await renderCopy(
      "--set",
      "otel.endpoint=http://otel-collector.observability:4318,otel.headersSecret=kubefn-otlp",
    );
    expect(deployment(withOtel)?.spec.template.spec.containers).toEqual([
      {
        name: "kubefn",
        image: `ghcr.io/kubefn/kubefn:${version}`,
        env: [
          { name: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "http://otel-collector.observability:4318" },
          {
            name: "OTEL_EXPORTER_OTLP_HEADERS",
            valueFrom: { secretKeyRef: { name: "kubefn-otlp", key: "headers" } },
          },
        ],
      },
      { name: "sidecar", image: "docker.io/library/busybox:1.36" },
    ]);
    const sized = deployment(
      await renderCopy(
        "--set",
        "host.replicas=3",
        "--set-json",
        'host.resources={"limits":{"memory":"1Gi"}}',
      ),
    );
    expect((sized?.spec as { replicas?: number } | undefined)?.replicas).toBe(3);
    expect(sized?.spec.template.spec.containers).toEqual([
      { name: "kubefn", image: `ghcr.io/kubefn/kubefn:${version}`, resources: { limits: { memory: "1Gi" } } },
      { name: "sidecar", image: "docker.io/library/busybox:1.36" },
    ]);
    expect((deployment(plain) as { spec: { replicas?: number } } | undefined)?.spec.replicas).toBeUndefined();
    // A shared cluster's placement and a registry mirror, as any chart takes them.
    const placed = deployment(
      await renderCopy(
        "--set-json",
        `host=${JSON.stringify(placement.host)}`,
        "--set-json",
        `imagePullSecrets=${JSON.stringify(placement.imagePullSecrets)}`,
      ),
    );
    expect(placed?.spec.template.spec).toMatchObject({
      ...placementSpec(placement.host),
      imagePullSecrets: placement.imagePullSecrets,
    });
    expect(placed?.spec.template.spec.containers[0]?.image).toBe("registry.example.com/mirror/kubefn:1.2.3");
    expect(placed?.spec.template.spec.containers[1]?.image).toBe("docker.io/library/busybox:1.36");
    expect(Object.keys(deployment(plain)?.spec.template.spec ?? {}).sort()).toEqual([
      "containers",
      "serviceAccountName",
    ]);
    expect(deployment(await renderCopy("--set", "host.enabled=false"))).toBeUndefined();
    const text = (await renderCopy("--set", "settings.create=true")).map((o) => JSON.stringify(o)).join("\n");
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], text);
    expect(r.code, r.stderr).toBe(0);
    // Created, or configured where an earlier install left the release's own host.
    expect(r.stdout).toMatch(/^deployment\.apps\/kubefn (created|configured) \(server dry run\)$/m);
  });

  it("renders nothing with every part off", async () => {
    const text = await render(
      "--set",
      "relay.enabled=false,namespace.create=false,serviceMonitor.enabled=true,host.enabled=false",
      "--set",
      "rbac.create=false,admissionPolicies.create=false",
    );
    // A ServiceMonitor without the relay has nothing to scrape; CRDs come from crds/ (helm install).
    expect(objectsOf(text)).toEqual([]);
  });
});
