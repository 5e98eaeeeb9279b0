/**
 * The generated CRDs against a real API server: each installs and becomes Established, accepts a
 * valid object (with server-side defaults), and rejects schema and CEL violations with 422.
 */
import { ApiException, ApiextensionsV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { operatorCrds } from "../../install/index.ts";

const controllerCrds = await operatorCrds();

import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Resource } from "../../shared/kube/port.ts";

declare module "vitest" {
  // biome-ignore lint/suspicious/noExportsInTest: augments vitest's ProvidedContext (test/setup provides it).
  export interface ProvidedContext {
    kubeconfig: string;
  }
}

const namespace = "default";
const suffix = Math.random().toString(36).slice(2, 8);
const created: Array<{ resource: Resource; name: string }> = [];

let extensions: ApiextensionsV1Api;
let objects: CustomObjectsApi;

async function waitEstablished(name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const crd = await extensions.readCustomResourceDefinition({ name });
    const established = crd.status?.conditions?.find((c) => c.type === "Established");
    if (established?.status === "True") return;
    if (Date.now() > deadline) throw new Error(`${name} not Established: ${JSON.stringify(crd.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

type Body = Record<string, unknown> & { metadata: { name: string; [key: string]: unknown } };

const resourceByKind: Record<string, Resource> = {
  Proxy: proxyResource,
  SubPool: subPoolResource,
  Site: siteResource,
};

async function create(body: Body): Promise<Body> {
  const resource = resourceByKind[body.kind as string]!;
  const common = { group: resource.group, version: resource.version, plural: resource.resource, body };
  // A freshly Established CRD can answer 404 for a moment while its handler is installed.
  for (let attempt = 0; ; attempt++) {
    try {
      const out = resource.namespaced
        ? await objects.createNamespacedCustomObject({ ...common, namespace })
        : await objects.createClusterCustomObject(common);
      created.push({ resource, name: body.metadata.name });
      return out as Body;
    } catch (error) {
      if (error instanceof ApiException && error.code === 404 && attempt < 50) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        continue;
      }
      throw error;
    }
  }
}

async function replace(resource: Resource, body: Body): Promise<Body> {
  const common = {
    group: resource.group,
    version: resource.version,
    plural: resource.resource,
    name: body.metadata.name,
    body,
  };
  const out = resource.namespaced
    ? await objects.replaceNamespacedCustomObject({ ...common, namespace })
    : await objects.replaceClusterCustomObject(common);
  return out as Body;
}

/** Resolves to the API error (code and message) a write fails with. */
async function rejection(write: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await write;
  } catch (error) {
    if (error instanceof ApiException) {
      const body = typeof error.body === "string" ? error.body : JSON.stringify(error.body);
      return { code: error.code, message: body };
    }
    throw error;
  }
  throw new Error("the write was accepted");
}

const apiVersion = (r: Resource) => `${r.group}/${r.version}`;
const resources = { requests: { cpu: "100m", memory: "128Mi" } };

const proxy = (name: string, spec: Record<string, unknown>): Body => ({
  apiVersion: apiVersion(proxyResource),
  kind: "Proxy",
  metadata: { name: `${name}-${suffix}`, namespace },
  spec,
});
const subPool = (name: string, spec: Record<string, unknown> = {}): Body => ({
  apiVersion: apiVersion(subPoolResource),
  kind: "SubPool",
  metadata: { name: `${name}-${suffix}` },
  spec: {
    exposure: { mode: "Internal" },
    storage: { size: "1Gi" },
    cpa: { image: "cpa:1", resources },
    cpaManager: { image: "cpa-manager:1", resources: { requests: { cpu: 1, memory: "64Mi" } } },
    ...spec,
  },
});
const site = (name: string, spec?: Record<string, unknown>): Body => ({
  apiVersion: apiVersion(siteResource),
  kind: "Site",
  metadata: { name: `${name}-${suffix}` },
  ...(spec === undefined ? {} : { spec }),
});

beforeAll(async () => {
  const config = new KubeConfig();
  config.loadFromFile(inject("kubeconfig"));
  extensions = config.makeApiClient(ApiextensionsV1Api);
  objects = config.makeApiClient(CustomObjectsApi);
  // The committed YAML, server-side applied, is what users install; client-node's typed
  // CRD model would drop the x-kubernetes-* extensions it does not know by their JSON names.
  await installCrdsAndRbac(createKube(createNodeTransport(config)));
});

afterAll(async () => {
  for (const { resource, name } of created.reverse()) {
    const common = { group: resource.group, version: resource.version, plural: resource.resource, name };
    await (resource.namespaced
      ? objects.deleteNamespacedCustomObject({ ...common, namespace })
      : objects.deleteClusterCustomObject(common)
    ).catch(() => undefined);
  }
});

describe("generated CRDs on a real API server", () => {
  it.each(controllerCrds.map((spec) => [`${spec.plural}.${spec.group}`]))(
    "%s becomes Established",
    async (name) => {
      await waitEstablished(name);
    },
  );

  describe("Proxy", () => {
    it("accepts a Managed proxy and applies the schema defaults", async () => {
      const out = await create(
        proxy("managed", { provider: "kubernetes", healthCheck: { probeURL: "https://example.com/" } }),
      );
      expect(out.spec).toMatchObject({
        mode: "Managed",
        healthCheck: {
          expectedStatus: 200,
          intervalSeconds: 30,
          timeoutSeconds: 5,
          successThreshold: 2,
          failureThreshold: 3,
        },
      });
    });

    it("accepts an External proxy", async () => {
      const out = await create(
        proxy("external", { mode: "External", endpoint: { host: "10.0.0.1", port: 3128 } }),
      );
      expect(out.spec).toMatchObject({ endpoint: { scheme: "http" } });
    });

    it.each(["proxy.example.com", "::1", "fd00::7", "[::1]", "proxy.example.com."].map((h, i) => [h, i]))(
      "accepts the endpoint host %s",
      async (host, i) => {
        const out = await create(proxy(`host-${i}`, { mode: "External", endpoint: { host, port: 3128 } }));
        expect(out.spec).toMatchObject({ endpoint: { host } });
      },
    );

    it.each(["127.0.0.1:3128", "http://proxy.example.com", "10.0.0.1/24", "user@proxy.example.com", "a b"])(
      "rejects an endpoint host with more than a host in it: %s (CEL)",
      async (host) => {
        const { code, message } = await rejection(
          create(proxy("pasted", { mode: "External", endpoint: { host, port: 3128 } })),
        );
        expect(code).toBe(422);
        expect(message).toContain("endpoint.host must be a host name or an IP address alone");
      },
    );

    it.each([
      ["an unknown mode", { mode: "Hybrid", provider: "gce" }, "mode"],
      ["a port out of range", { mode: "External", endpoint: { host: "h", port: 70000 } }, "port"],
      [
        "an interval below 5s",
        { provider: "gce", healthCheck: { probeURL: "https://x.test/", intervalSeconds: 1 } },
        "intervalSeconds",
      ],
      [
        "a probe timeout above 30s (probe slots are shared)",
        {
          provider: "gce",
          healthCheck: { probeURL: "https://x.test/", intervalSeconds: 60, timeoutSeconds: 31 },
        },
        "timeoutSeconds",
      ],
    ])("rejects %s (schema)", async (_name, spec, field) => {
      const { code, message } = await rejection(create(proxy("bad", spec)));
      expect(code).toBe(422);
      expect(message).toContain(field);
    });

    it.each([
      ["External without endpoint", { mode: "External" }, "spec.endpoint is required when mode is External"],
      ["Managed without provider", {}, "spec.provider is required when mode is Managed"],
      [
        "cloudInit with both sources",
        { provider: "gce", cloudInit: { inline: "#cloud-config", secretRef: { name: "s" } } },
        "set exactly one of cloudInit.inline or cloudInit.secretRef",
      ],
      [
        "a probe timeout longer than the interval",
        {
          provider: "gce",
          healthCheck: { probeURL: "https://x.test/", intervalSeconds: 10, timeoutSeconds: 20 },
        },
        "healthCheck.timeoutSeconds must not exceed healthCheck.intervalSeconds",
      ],
    ])("rejects %s (CEL)", async (_name, spec, text) => {
      const { code, message } = await rejection(create(proxy("cel", spec)));
      expect(code).toBe(422);
      expect(message).toContain(text);
    });
  });

  describe("SubPool", () => {
    it("accepts a SubPool, defaults suspend, and keeps storage.size immutable", async () => {
      const out = await create(subPool("pool"));
      expect(out.spec).toMatchObject({ suspend: false });
      const resized = { ...out, spec: { ...(out.spec as object), storage: { size: "2Gi" } } } as Body;
      const { code, message } = await rejection(replace(subPoolResource, resized));
      expect(code).toBe(422);
      expect(message).toContain("storage.size is immutable");
      const suspended = { ...out, spec: { ...(out.spec as object), suspend: true } } as Body;
      await expect(replace(subPoolResource, suspended)).resolves.toMatchObject({ spec: { suspend: true } });
    });

    it.each([
      [
        "missing memory request",
        { cpa: { image: "cpa:1", resources: { requests: { cpu: "1" } } } },
        "memory",
      ],
      ["an unknown exposure mode", { exposure: { mode: "Public" } }, "mode"],
      ["a malformed quantity", { storage: { size: "lots" } }, "size"],
    ])("rejects %s (schema)", async (_name, spec, field) => {
      const { code, message } = await rejection(create(subPool("bad", spec)));
      expect(code).toBe(422);
      expect(message).toContain(field);
    });

    it("rejects a hostname outside Gateway mode and a too-long name (CEL)", async () => {
      const hostname = await rejection(
        create(subPool("host", { exposure: { mode: "Internal", hostname: "a.example.com" } })),
      );
      expect(hostname.code).toBe(422);
      expect(hostname.message).toContain("apply only to mode Gateway");
      const long = await rejection(create(subPool("x".repeat(40))));
      expect(long.code).toBe(422);
      // The rule names the field it is about, not `<nil>` (kubectl: "metadata.name: Invalid value: …").
      expect(long.message).toContain("metadata.name: Invalid value: ");
      expect(long.message).toContain("must be at most 40 characters");
      expect(long.message).not.toContain("<nil>");
    });
  });

  describe("Site", () => {
    it("accepts a Site without spec and defaults it", async () => {
      const out = await create(site("east"));
      expect(out.spec).toEqual({});
    });

    it("accepts component toggles and defaults enabled", async () => {
      const out = await create(site("west", { components: { storage: { enabled: false }, metalman: {} } }));
      expect(out.spec).toEqual({ components: { storage: { enabled: false }, metalman: { enabled: true } } });
    });

    it("rejects a wrongly typed toggle (schema) and a dotted name (CEL)", async () => {
      const typed = await rejection(create(site("typed", { components: { storage: { enabled: "yes" } } })));
      expect(typed.code).toBe(422);
      const dotted = await rejection(create(site("a.b")));
      expect(dotted.code).toBe(422);
      expect(dotted.message).toContain("metadata.name: Invalid value: ");
      expect(dotted.message).toContain("must be a DNS label");
      expect(dotted.message).not.toContain("<nil>");
    });
  });
});
