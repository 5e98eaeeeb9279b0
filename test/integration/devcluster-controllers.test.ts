/**
 * The devcluster runs what a real cluster runs for the operators here: the workload controllers
 * (Deployment → ReplicaSet → Pod, StatefulSet with volume claims that bind), EndpointSlices, the
 * Gateway API CRDs with a gateway controller reporting status, and a real forward proxy in Pods of
 * kubefn's proxy image.
 */

import { randomBytes } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, kubectl } from "../setup/cluster.ts";
import { startHttpTarget, type Target } from "../support/probe-fixtures.ts";

const ns = `dc-${randomBytes(3).toString("hex")}`;
const other = `${ns}-b`;

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const jsonpath = (args: string[], path: string) => ok([...args, "-o", `jsonpath=${path}`]);
const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000) =>
  eventually(
    async () => {
      try {
        return await check();
      } catch {
        return undefined;
      }
    },
    { timeoutMs, intervalMs: 200, what },
  );

beforeAll(async () => {
  await ok(["create", "namespace", ns]);
  await ok(["create", "namespace", other]);
  await ok(["label", "namespace", other, "team=b"]);
});

afterAll(async () => {
  await kubectl(["delete", "namespace", ns, other, "--wait=false"]);
});

describe("workload controllers", () => {
  it("a Deployment rolls out through a ReplicaSet to ready Pods with EndpointSlices", async () => {
    await ok([
      "create",
      "deployment",
      "web",
      "-n",
      ns,
      "--image=registry.example/web:1",
      "--replicas=2",
      "--port=80",
    ]);
    await ok(["expose", "deployment", "web", "-n", ns, "--port=80"]);
    await until("2 ready replicas", async () =>
      (await jsonpath(["get", "deployment", "web", "-n", ns], "{.status.readyReplicas}")) === "2"
        ? true
        : undefined,
    );
    expect(await jsonpath(["get", "replicasets", "-n", ns], "{.items[*].status.readyReplicas}")).toBe("2");
    // Workload Pods sit on a pretend pod network: the API server refuses loopback endpoints.
    const ips = (
      await jsonpath(["get", "pods", "-n", ns, "-l", "app=web"], "{.items[*].status.podIP}")
    ).split(" ");
    expect(ips).toHaveLength(2);
    for (const ip of ips) expect(ip).toMatch(/^10\.244\./);
    await until("2 ready endpoints", async () =>
      (await jsonpath(
        ["get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web"],
        "{.items[*].endpoints[*].conditions.ready}",
      )) === "true true"
        ? true
        : undefined,
    );
  });

  it("a StatefulSet's volume claim is provisioned and bound before its Pod runs", async () => {
    await ok(
      ["apply", "-n", ns, "-f", "-"],
      JSON.stringify({
        apiVersion: "apps/v1",
        kind: "StatefulSet",
        metadata: { name: "db" },
        spec: {
          replicas: 1,
          serviceName: "db",
          selector: { matchLabels: { app: "db" } },
          template: {
            metadata: { labels: { app: "db" } },
            spec: { containers: [{ name: "db", image: "registry.example/db:1" }] },
          },
          volumeClaimTemplates: [
            {
              metadata: { name: "data" },
              spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
            },
          ],
        },
      }),
    );
    await until("StatefulSet ready", async () =>
      (await jsonpath(["get", "statefulset", "db", "-n", ns], "{.status.readyReplicas}")) === "1"
        ? true
        : undefined,
    );
    const pvc = JSON.parse(await ok(["get", "pvc", "data-db-0", "-n", ns, "-o", "json"])) as {
      spec: { volumeName: string; storageClassName: string };
      status: { phase: string };
    };
    expect(pvc.status.phase).toBe("Bound");
    expect(pvc.spec.storageClassName).toBe("standard");
    expect(await jsonpath(["get", "pv", pvc.spec.volumeName], "{.status.phase}")).toBe("Bound");
    // Deleting the claim releases the volume, which the provisioner deletes (reclaim policy Delete).
    await ok(["delete", "statefulset", "db", "-n", ns]);
    await ok(["delete", "pvc", "data-db-0", "-n", ns, "--wait=false"]);
    await until("volume deleted", async () => {
      const r = await kubectl(["get", "pv", pvc.spec.volumeName]);
      return r.code !== 0 && r.stderr.includes("NotFound") ? true : undefined;
    });
  });
});

describe("Gateway API", () => {
  beforeAll(async () => {
    await ok(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: [
          {
            apiVersion: "gateway.networking.k8s.io/v1",
            kind: "Gateway",
            metadata: { name: "gw", namespace: ns },
            spec: {
              gatewayClassName: "devcluster",
              listeners: [
                {
                  name: "web",
                  protocol: "HTTP",
                  port: 80,
                  hostname: "*.example.test",
                  allowedRoutes: {
                    namespaces: { from: "Selector", selector: { matchLabels: { team: "b" } } },
                  },
                },
                { name: "same", protocol: "HTTP", port: 8080 },
              ],
            },
          },
          {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: "svc", namespace: other },
            spec: { ports: [{ port: 80 }] },
          },
        ],
      }),
    );
  });

  const route = (namespace: string, name: string, spec: Record<string, unknown>) =>
    ok(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "HTTPRoute",
        metadata: { name, namespace },
        spec: { parentRefs: [{ name: "gw", namespace: ns }], ...spec },
      }),
    );
  const parentConditions = async (namespace: string, name: string) => {
    const r = JSON.parse(await ok(["get", "httproute", name, "-n", namespace, "-o", "json"])) as {
      status?: {
        parents?: {
          controllerName: string;
          conditions: { type: string; status: string; reason: string }[];
        }[];
      };
    };
    const ours = r.status?.parents?.find(
      (p) => p.controllerName === "devcluster.kubefn.dev/gateway-controller",
    );
    return ours
      ? Object.fromEntries(ours.conditions.map((c) => [c.type, `${c.status}/${c.reason}`]))
      : undefined;
  };

  it("the GatewayClass is Accepted and the Gateway Accepted and Programmed", async () => {
    await until("class accepted", async () =>
      (await jsonpath(
        ["get", "gatewayclass", "devcluster"],
        '{.status.conditions[?(@.type=="Accepted")].status}',
      )) === "True"
        ? true
        : undefined,
    );
    await until("gateway programmed", async () =>
      (await jsonpath(
        ["get", "gateway", "gw", "-n", ns],
        '{.status.conditions[?(@.type=="Programmed")].status}',
      )) === "True"
        ? true
        : undefined,
    );
    expect(await jsonpath(["get", "gateway", "gw", "-n", ns], "{.status.listeners[*].name}")).toBe(
      "web same",
    );
  });

  it("an allowed route with a resolvable backend is Accepted and ResolvedRefs, and counted on its listener", async () => {
    await route(other, "ok", {
      hostnames: ["a.example.test"],
      rules: [{ backendRefs: [{ name: "svc", port: 80 }] }],
    });
    expect(
      await until("conditions", async () => {
        const c = await parentConditions(other, "ok");
        return c?.Accepted === "True/Accepted" ? c : undefined;
      }),
    ).toEqual({ Accepted: "True/Accepted", ResolvedRefs: "True/ResolvedRefs" });
    await until("attachedRoutes 1", async () =>
      (await jsonpath(["get", "gateway", "gw", "-n", ns], "{.status.listeners[0].attachedRoutes}")) === "1"
        ? true
        : undefined,
    );
  });

  it.each([
    [
      "a namespace the listeners do not allow",
      ns,
      "denied",
      { parentRefs: [{ name: "gw", namespace: ns, sectionName: "web" }], hostnames: ["a.example.test"] },
      "False/NotAllowedByListeners",
    ],
    [
      "a hostname no listener serves",
      other,
      "nohost",
      { hostnames: ["x.other.test"] },
      "False/NoMatchingListenerHostname",
    ],
  ])("a route from %s is not Accepted", async (_what, namespace, name, spec, want) => {
    await route(namespace, name, spec);
    expect(await until("Accepted set", async () => (await parentConditions(namespace, name))?.Accepted)).toBe(
      want,
    );
  });

  it.each([
    ["a missing Service", "missing", { name: "nope", port: 80 }, "False/BackendNotFound"],
    [
      "another namespace's Service without a ReferenceGrant",
      "cross",
      { name: "web", namespace: ns, port: 80 },
      "False/RefNotPermitted",
    ],
  ])("a backendRef to %s is not resolved", async (_what, name, backendRef, want) => {
    await route(other, name, { hostnames: ["a.example.test"], rules: [{ backendRefs: [backendRef] }] });
    expect(
      await until("ResolvedRefs set", async () => (await parentConditions(other, name))?.ResolvedRefs),
    ).toBe(want);
  });

  it("a ReferenceGrant resolves the cross-namespace backendRef", async () => {
    await ok(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "ReferenceGrant",
        metadata: { name: "from-b", namespace: ns },
        spec: {
          from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: other }],
          to: [{ group: "", kind: "Service" }],
        },
      }),
    );
    expect(
      await until("resolved", async () => {
        const c = await parentConditions(other, "cross");
        return c?.ResolvedRefs === "True/ResolvedRefs" ? c.ResolvedRefs : undefined;
      }),
    ).toBe("True/ResolvedRefs");
  });
});

describe("Pods of kubefn's proxy image", () => {
  let target: Target;
  beforeAll(async () => {
    target = await startHttpTarget();
  });
  afterAll(async () => {
    await target?.close();
  });

  it("get a real forward proxy at their Pod IP (absolute-form and CONNECT), gone when the Pod is", async () => {
    await ok(["run", "fwd", "-n", ns, "--image=ghcr.io/kubefn/forward-proxy:latest", "--port=3128"]);
    const ip = await until("Pod IP", async () => {
      const r = await jsonpath(["get", "pod", "fwd", "-n", ns], "{.status.phase} {.status.podIP}");
      const [phase, podIP] = r.split(" ");
      return phase === "Running" && podIP ? podIP : undefined;
    });
    const viaProxy = await new Promise<number>((resolve, reject) => {
      http
        .get({ host: ip, port: 3128, path: `http://127.0.0.1:${target.port}/` }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on("error", reject);
    });
    expect(viaProxy).toBe(200);
    const tunnelled = await new Promise<string>((resolve, reject) => {
      const s = net.connect(3128, ip, () => {
        s.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n\r\n`);
      });
      let buf = "";
      s.setEncoding("utf8").on("data", (d: string) => {
        buf += d;
        if (buf.includes("\r\n\r\n") && !buf.includes("GET")) {
          s.write(`GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
          buf += "GET";
        }
      });
      s.on("end", () => resolve(buf));
      s.on("error", reject);
    });
    expect(tunnelled).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(tunnelled).toContain("HTTP/1.1 200 OK");
    expect(target.hits).toBe(2);

    await ok(["delete", "pod", "fwd", "-n", ns]);
    await until("proxy closed", async () => {
      const refused = await new Promise<boolean>((resolve) => {
        const s = net.connect(3128, ip, () => {
          s.destroy();
          resolve(false);
        });
        s.on("error", () => resolve(true));
      });
      return refused ? true : undefined;
    });
  });

  it("other images get none", async () => {
    await ok(["run", "plain", "-n", ns, "--image=registry.example/forward-proxy:test", "--port=3128"]);
    const ip = await until("Pod IP", async () => {
      const r = await jsonpath(["get", "pod", "plain", "-n", ns], "{.status.phase} {.status.podIP}");
      const [phase, podIP] = r.split(" ");
      return phase === "Running" && podIP ? podIP : undefined;
    });
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(3128, ip, () => {
        s.destroy();
        resolve(false);
      });
      s.on("error", () => resolve(true));
    });
    expect(refused).toBe(true);
  });
});
