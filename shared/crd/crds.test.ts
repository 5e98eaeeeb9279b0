import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { operatorCrds } from "../../install/index.ts";
import { expectedCrdFiles } from "../../scripts/gen-crds.ts";

const controllerCrds = await operatorCrds();

import { parseProxy } from "../controllers/proxy/api.ts";
import { parseSite, siteComponentEnabled } from "../controllers/site/api.ts";
import { parseSubPool } from "../controllers/subpool/api.ts";
import { crdFor, type JsonSchemaProps, structuralViolations } from "./index.ts";
import { crdFileName, generatedHeader, renderCrdYaml } from "./render.ts";

const crds = controllerCrds.map((spec) => ({ spec, crd: crdFor(spec) }));
const table = crds.map(({ crd, spec }) => [crd.metadata.name, spec, crd] as const);

/** Follows a printer column's simple JSONPath (`.a.b`, `.a[?(...)].b`) through the schema. */
function schemaAt(schema: JsonSchemaProps, jsonPath: string): JsonSchemaProps | undefined {
  // ObjectMeta is the API server's, whatever the CRD declares of it.
  if (jsonPath.startsWith(".metadata.")) return schema.properties?.metadata;
  let node: JsonSchemaProps | undefined = schema;
  for (const part of jsonPath
    .replace(/\[\?\(.*?\)\]/g, ".[]")
    .split(".")
    .filter(Boolean)) {
    if (node === undefined) return undefined;
    if (part === "[]") node = node.items;
    else if (node.type === "object" && node.properties === undefined) return node;
    else node = node.properties?.[part];
  }
  return node;
}

describe("generated CRDs", () => {
  it.each(table)("%s is structural", (_name, _spec, crd) => {
    for (const version of crd.spec.versions) {
      expect(structuralViolations(version.schema.openAPIV3Schema)).toEqual([]);
    }
  });

  it.each(table)("%s has the status subresource and the kind's names", (name, spec, crd) => {
    expect(name).toBe(`${spec.plural}.${spec.group}`);
    expect(crd.spec.versions).toHaveLength(1);
    expect(crd.spec.versions[0]?.subresources).toEqual({ status: {} });
    expect(crd.spec.names.listKind).toBe(`${spec.kind}List`);
  });

  it.each(table)("%s printer columns point at schema fields", (_name, _spec, crd) => {
    const version = crd.spec.versions[0]!;
    for (const column of version.additionalPrinterColumns ?? []) {
      expect(schemaAt(version.schema.openAPIV3Schema, column.jsonPath), column.jsonPath).toBeDefined();
    }
  });

  it.each(table)(
    "%s describes every field it declares (what `kubectl explain` prints)",
    (_name, _spec, crd) => {
      const root = crd.spec.versions[0]!.schema.openAPIV3Schema;
      const undocumented: string[] = [];
      const walk = (node: JsonSchemaProps, path: string): void => {
        if (path !== "" && node.description === undefined) undocumented.push(path);
        for (const [name, child] of Object.entries(node.properties ?? {})) {
          if (path === "" && name === "metadata") continue;
          walk(child, path === "" ? name : `${path}.${name}`);
        }
        // A list's items are described by the list; their own fields are walked.
        for (const [name, child] of Object.entries(node.items?.properties ?? {}))
          walk(child, `${path}[].${name}`);
      };
      walk(root, "");
      expect(root.description).toBeDefined();
      expect(undocumented).toEqual([]);
    },
  );

  it.each(table)(
    "infra/crds/%s.yaml is what the generator produces (run `npm run gen:crds`)",
    async (_n, _s, crd) => {
      const committed = await readFile(
        new URL(`../../infra/crds/${crdFileName(crd)}`, import.meta.url),
        "utf8",
      );
      expect(committed).toBe(renderCrdYaml(crd));
    },
  );

  it("renders deterministically, with the generated header, as YAML that parses back to the CRD", () => {
    for (const { crd } of crds) {
      const text = renderCrdYaml(crd);
      expect(text).toBe(
        renderCrdYaml(crdFor(controllerCrds.find((s) => `${s.plural}.${s.group}` === crd.metadata.name)!)),
      );
      expect(text.startsWith(`${generatedHeader}\n`)).toBe(true);
      expect(parse(text)).toEqual(JSON.parse(JSON.stringify(crd)));
    }
  });

  it("generates one file per controller CRD, and the Site bundle's machines CRD", async () => {
    expect([...(await expectedCrdFiles()).keys()].sort()).toEqual([
      "machines.unbounded-cloud.io.yaml",
      "proxies.crawl.kubefn.dev.yaml",
      "sites.unbounded-cloud.io.yaml",
      "subpools.subrelay.example.com.yaml",
    ]);
  });
});

const proxy = (spec: unknown) => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { name: "p", namespace: "default" },
  spec,
});

describe("parse functions mirror the CEL rules and apply defaults", () => {
  it.each([
    ["Managed with provider", { provider: "kubernetes" }, true],
    ["Managed without provider", {}, false],
    ["External with endpoint", { mode: "External", endpoint: { host: "h", port: 3128 } }, true],
    ["External without endpoint", { mode: "External" }, false],
    [
      "cloudInit with both sources",
      { provider: "gce", cloudInit: { inline: "x", secretRef: { name: "s" } } },
      false,
    ],
    ["cloudInit with neither source", { provider: "gce", cloudInit: {} }, false],
    ["port out of range", { mode: "External", endpoint: { host: "h", port: 70000 } }, false],
    [
      "interval below 5s",
      { provider: "gce", healthCheck: { probeURL: "https://x.test", intervalSeconds: 1 } },
      false,
    ],
  ])("parseProxy: %s", (_name, spec, ok) => {
    expect(parseProxy(proxy(spec)).success).toBe(ok);
  });

  it("parseProxy applies defaults and keeps metadata", () => {
    const result = parseProxy(proxy({ provider: "gce", healthCheck: { probeURL: "https://x.test/" } }));
    expect(result.success && result.data.spec).toMatchObject({
      mode: "Managed",
      healthCheck: {
        expectedStatus: 200,
        intervalSeconds: 30,
        timeoutSeconds: 5,
        successThreshold: 2,
        failureThreshold: 3,
      },
    });
    expect(result.success && result.data.metadata.namespace).toBe("default");
  });

  it("parseProxy rejects another kind", () => {
    expect(parseProxy({ ...proxy({ provider: "gce" }), kind: "SubPool" }).success).toBe(false);
  });

  const resources = { requests: { cpu: "100m", memory: "128Mi" } };
  const subPool = (spec: Record<string, unknown>) => ({
    apiVersion: "subrelay.example.com/v1alpha1",
    kind: "SubPool",
    metadata: { name: "demo-pool" },
    spec: {
      exposure: { mode: "Internal" },
      storage: { size: "1Gi" },
      cpa: { image: "cpa:1", resources },
      cpaManager: { image: "mgr:1", resources: { requests: { cpu: 1, memory: "64Mi" } } },
      ...spec,
    },
  });

  it.each([
    ["minimal", {}, true],
    ["missing memory request", { cpa: { image: "cpa:1", resources: { requests: { cpu: "1" } } } }, false],
    ["bad quantity", { storage: { size: "lots" } }, false],
    ["unknown exposure mode", { exposure: { mode: "Public" } }, false],
  ])("parseSubPool: %s", (_name, spec, ok) => {
    expect(parseSubPool(subPool(spec)).success).toBe(ok);
  });

  it("parseSubPool defaults suspend to false", () => {
    const result = parseSubPool(subPool({}));
    expect(result.success && result.data.spec.suspend).toBe(false);
  });

  it("parseSite defaults a missing spec; absent component toggles mean enabled", () => {
    const result = parseSite({
      apiVersion: "unbounded-cloud.io/v1alpha3",
      kind: "Site",
      metadata: { name: "s1" },
    });
    expect(result.success).toBe(true);
    if (!result.success) return;
    expect(result.data.spec).toEqual({});
    expect(siteComponentEnabled(result.data, "storage")).toBe(true);
    const off = parseSite({
      ...result.data,
      spec: { components: { storage: { enabled: false }, metalman: {} } },
    });
    expect(off.success && siteComponentEnabled(off.data, "storage")).toBe(false);
    expect(off.success && siteComponentEnabled(off.data, "metalman")).toBe(true);
  });
});
