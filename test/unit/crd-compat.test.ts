/**
 * CRD schemas only grow within an API version: the current CRDs (infra/crds) against the previous
 * release's (test/fixtures/crds/<version>/, recorded when it shipped), and the check itself both
 * ways on small schemas.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { type Crd, crdIncompatibilities, type Schema } from "../../scripts/release/crd-compat.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const PREVIOUS_RELEASE = "0.1.0";

function crdsIn(dir: string): Crd[] {
  return readdirSync(join(root, dir))
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) => parseAllDocuments(readFileSync(join(root, dir, f), "utf8")).map((d) => d.toJSON() as Crd))
    .filter((o) => o?.metadata);
}

function crd(schema: Schema, versions: string[] = ["v1"]): Crd {
  return {
    metadata: { name: "widgets.example.com" },
    spec: {
      group: "example.com",
      scope: "Namespaced",
      names: { kind: "Widget", plural: "widgets", singular: "widget", shortNames: ["wd"] },
      versions: versions.map((name) => ({ name, served: true, schema: { openAPIV3Schema: schema } })),
    },
  };
}

const spec = (properties: Record<string, Schema>, extra: Partial<Schema> = {}): Schema => ({
  type: "object",
  properties: { spec: { type: "object", properties, ...extra } },
});

describe(`the CRDs against release ${PREVIOUS_RELEASE}'s`, () => {
  const previous = crdsIn(`test/fixtures/crds/${PREVIOUS_RELEASE}`);
  const current = crdsIn("infra/crds");

  it("records every CRD of that release", () => {
    expect(previous.map((c) => c.metadata.name).sort()).toEqual([
      "proxies.crawl.kubefn.dev",
      "sites.unbounded-cloud.io",
      "subpools.subrelay.example.com",
    ]);
  });

  it("removes no field, narrows no enum, requires nothing new and adds no validation", () => {
    expect(crdIncompatibilities(previous, current)).toEqual([]);
  });

  it("would catch a field removed from the real Proxy schema", () => {
    const broken = structuredClone(current);
    const proxy = broken.find((c) => c.metadata.name === "proxies.crawl.kubefn.dev");
    const specSchema = proxy?.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.spec;
    const [field] = Object.keys(specSchema?.properties ?? {});
    delete specSchema?.properties?.[field as string];
    expect(crdIncompatibilities(previous, broken)).toEqual([
      `proxies.crawl.kubefn.dev ${proxy?.spec.versions[0]?.name} .spec.${field}: field removed`,
    ]);
  });
});

describe("crdIncompatibilities", () => {
  const base = spec(
    {
      mode: { type: "string", enum: ["Managed", "External"] },
      replicas: { type: "integer", minimum: 0, maximum: 10 },
      name: { type: "string", maxLength: 63 },
      tags: { type: "array", items: { type: "string" } },
      labels: { type: "object", additionalProperties: { type: "string" } },
    },
    { required: ["mode"] },
  );
  const changed = (edit: (s: Schema) => void): Crd => {
    const s = structuredClone(base);
    edit(s.properties?.spec as Schema);
    return crd(s);
  };
  const field = (s: Schema, name: string) => s.properties?.[name] as Schema;

  it.each<[string, (s: Schema) => void]>([
    ["a new optional field", (s) => Object.assign(s.properties as object, { note: { type: "string" } })],
    ["an enum value added", (s) => field(s, "mode").enum?.push("Hybrid")],
    ["a bound loosened", (s) => Object.assign(field(s, "replicas"), { maximum: 20, minimum: undefined })],
    ["a length limit raised", (s) => Object.assign(field(s, "name"), { maxLength: 253 })],
    ["a field no longer required", (s) => Object.assign(s, { required: [] })],
    ["a description changed", (s) => Object.assign(field(s, "name"), { description: "the name" })],
  ])("allows %s", (_, edit) => {
    expect(crdIncompatibilities([crd(base)], [changed(edit)])).toEqual([]);
  });

  it.each<[string, (s: Schema) => void, string]>([
    ["a field removed", (s) => delete s.properties?.name, ".spec.name: field removed"],
    [
      "a type changed",
      (s) => Object.assign(field(s, "name"), { type: "integer" }),
      ".spec.name: type changed from string to integer",
    ],
    [
      "an enum narrowed",
      (s) => Object.assign(field(s, "mode"), { enum: ["Managed"] }),
      ".spec.mode: enum narrowed (External removed)",
    ],
    ["an enum added", (s) => Object.assign(field(s, "name"), { enum: ["a"] }), ".spec.name: enum added (a)"],
    [
      "a new required field",
      (s) => Object.assign(s, { required: ["mode", "name"] }),
      ".spec.name: newly required",
    ],
    [
      "a minimum raised",
      (s) => Object.assign(field(s, "replicas"), { minimum: 1 }),
      ".spec.replicas: minimum 0 → 1",
    ],
    [
      "a maximum lowered",
      (s) => Object.assign(field(s, "replicas"), { maximum: 5 }),
      ".spec.replicas: maximum 10 → 5",
    ],
    [
      "a pattern added",
      (s) => Object.assign(field(s, "name"), { pattern: "^[a-z]+$" }),
      '.spec.name: pattern null → "^[a-z]+$"',
    ],
    [
      "a CEL rule added",
      (s) => Object.assign(s, { "x-kubernetes-validations": [{ rule: "self.replicas > 0" }] }),
      ".spec: validation rule added: self.replicas > 0",
    ],
    [
      "an item limit added",
      (s) => Object.assign(field(s, "tags"), { maxItems: 3 }),
      ".spec.tags: maxItems none → 3",
    ],
    [
      "a nested item field tightened",
      (s) => Object.assign(field(s, "tags").items as Schema, { maxLength: 8 }),
      ".spec.tags[]: maxLength none → 8",
    ],
    [
      "a map value tightened",
      (s) => Object.assign(field(s, "labels").additionalProperties as Schema, { minLength: 1 }),
      ".spec.labels{}: minLength none → 1",
    ],
  ])("refuses %s", (_, edit, problem) => {
    expect(crdIncompatibilities([crd(base)], [changed(edit)])).toEqual([`widgets.example.com v1 ${problem}`]);
  });

  it("refuses a CRD, a version or a short name removed", () => {
    expect(crdIncompatibilities([crd(base)], [])).toEqual(["widgets.example.com: CRD removed"]);
    expect(crdIncompatibilities([crd(base, ["v1", "v2"])], [crd(base, ["v2"])])).toEqual([
      "widgets.example.com v1: version no longer served",
    ]);
    const renamed = crd(base);
    renamed.spec.names.shortNames = [];
    expect(crdIncompatibilities([crd(base)], [renamed])).toEqual([
      "widgets.example.com: short name wd removed",
    ]);
  });

  it("leaves a new API version free: validation may be added there", () => {
    const strict = changed((s) => Object.assign(s, { required: ["mode", "name"] })).spec.versions[0];
    const next = crd(base);
    next.spec.versions.push({ ...(strict as Crd["spec"]["versions"][0]), name: "v2" });
    expect(crdIncompatibilities([crd(base)], [next])).toEqual([]);
  });
});
