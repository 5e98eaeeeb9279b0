import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseNodeHostEnv } from "./config.ts";

describe("Node host settings", () => {
  it("reads each directory of manifests an operator declares, by its variable", () => {
    expect(parseNodeHostEnv({}).manifestDirectories).toEqual([]);
    expect(parseNodeHostEnv({ SITE_MANIFESTS_DIR: "/etc/kubefn/site" }).manifestDirectories).toEqual([
      { option: "siteManifests", dir: "/etc/kubefn/site" },
    ]);
    // Empty, it is unset, as every setting is.
    expect(parseNodeHostEnv({ SITE_MANIFESTS_DIR: "" }).manifestDirectories).toEqual([]);
  });

  it("serves the fleet page open on loopback (the default listener), behind API_TOKEN on any other address", () => {
    expect(parseNodeHostEnv({}).settings.fleetPage).toBe("open");
    expect(parseNodeHostEnv({ KUBEFN_HOST: "::1" }).settings.fleetPage).toBe("open");
    expect(parseNodeHostEnv({ KUBEFN_HOST: "0.0.0.0" }).settings.fleetPage).toBe("token");
    expect(parseNodeHostEnv({ KUBEFN_HOST: "0.0.0.0", FLEET_PAGE: "open" }).settings.fleetPage).toBe("open");
    expect(parseNodeHostEnv({ KUBEFN_FLEET_PAGE: "off" }).settings.fleetPage).toBe("off");
  });

  it("runs 3 passes at once by default: the seed's MaxConcurrentReconciles", () => {
    expect(parseNodeHostEnv({}).settings.passConcurrency).toBe(3);
    expect(parseNodeHostEnv({ KUBEFN_CONCURRENCY: "8" }).settings.passConcurrency).toBe(8);
  });

  it("fans probes out as delayed shards by default, so a 30 s Proxy is probed every 30 s", () => {
    expect(parseNodeHostEnv({}).settings.probeShardSize).toBe(40);
    expect(parseNodeHostEnv({ KUBEFN_PROBE_SHARD_SIZE: "0" }).settings.probeShardSize).toBeUndefined();
  });

  it("in a Pod (no KUBECONFIG, KUBERNETES_SERVICE_HOST set) reconciles as the Pod's ServiceAccount", () => {
    const pod = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    expect(parseNodeHostEnv(pod).inCluster).toEqual({
      host: "10.96.0.1",
      port: 443,
      serviceAccountDir: "/var/run/secrets/kubernetes.io/serviceaccount",
    });
    expect(parseNodeHostEnv(pod).settings.sweepPeriodSeconds).toBe(60);
    expect(
      parseNodeHostEnv({ ...pod, KUBEFN_SERVICE_ACCOUNT_DIR: "/tmp/sa" }).inCluster?.serviceAccountDir,
    ).toBe("/tmp/sa");
    // A kubeconfig wins; with neither, the embedded devcluster.
    expect(parseNodeHostEnv({ ...pod, KUBECONFIG: "/k" }).inCluster).toBeUndefined();
    expect(parseNodeHostEnv({ KUBECONFIG: "" }).inCluster).toBeUndefined();
    expect(parseNodeHostEnv({}).kubeconfig).toBeUndefined();
  });

  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "" }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" }, false],
  ])("exports spans only when an OTLP endpoint is set and the SDK not disabled: %j → %s", (env, wanted) => {
    expect(parseNodeHostEnv(env).exportSpans).toBe(wanted);
  });

  it("shares the sweep through a Lease in a Pod by default; elsewhere only when KUBEFN_SWEEP_LEASE names one", () => {
    const pod = { KUBERNETES_SERVICE_HOST: "10.96.0.1" };
    expect(parseNodeHostEnv(pod).sweepLease).toEqual({ name: "kubefn-sweep" });
    expect(parseNodeHostEnv({ ...pod, KUBEFN_SWEEP_LEASE: "off" }).sweepLease).toBeUndefined();
    expect(parseNodeHostEnv({}).sweepLease).toBeUndefined();
    expect(parseNodeHostEnv({ KUBECONFIG: "/k" }).sweepLease).toBeUndefined();
    expect(parseNodeHostEnv({ KUBECONFIG: "/k", KUBEFN_SWEEP_LEASE: "ops/sweep" }).sweepLease).toEqual({
      namespace: "ops",
      name: "sweep",
    });
    expect(() => parseNodeHostEnv({ KUBEFN_SWEEP_LEASE: "Not A Name" })).toThrow(/KUBEFN_SWEEP_LEASE/);
  });
});

describe("Node host clusters (KUBEFN_CLUSTERS)", () => {
  const east = {
    name: "east",
    server: "https://east.example:6443",
    credential: { kind: "token", token: "t" },
  };

  it("is one cluster of today's settings when unset", () => {
    expect(parseNodeHostEnv({}).settings.clusters).toBeUndefined();
  });

  it("reads a JSON list, or the file the variable names", () => {
    expect(parseNodeHostEnv({ KUBEFN_CLUSTERS: JSON.stringify([east]) }).settings.clusters).toEqual([east]);
    const dir = mkdtempSync(join(tmpdir(), "kubefn-clusters-"));
    try {
      writeFileSync(join(dir, "clusters.json"), JSON.stringify([east]));
      expect(parseNodeHostEnv({ KUBEFN_CLUSTERS: join(dir, "clusters.json") }).settings.clusters).toEqual([
        east,
      ]);
      expect(() => parseNodeHostEnv({ KUBEFN_CLUSTERS: join(dir, "missing.json") })).toThrow(/cannot read/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it("refuses at start a credential kind it cannot use, naming the cluster", () => {
    const eks = {
      name: "prod",
      server: "https://x.eks.amazonaws.com",
      credential: { kind: "eks", clusterName: "p", region: "eu-west-1" },
    };
    expect(() => parseNodeHostEnv({ KUBEFN_CLUSTERS: JSON.stringify([east, eks]) })).toThrow(
      /KUBEFN_CLUSTERS: prod: credential kind eks cannot be used on this platform/,
    );
  });

  it("refuses kubefn's OIDC tokens without kubefn's OIDC issuer", () => {
    const edge = {
      name: "edge",
      server: "https://edge.example",
      credential: { kind: "oidc-issuer", audience: "edge" },
    };
    expect(() => parseNodeHostEnv({ KUBEFN_CLUSTERS: JSON.stringify([edge]) })).toThrow(/OIDC_ISSUER/);
  });

  it("refuses the one-cluster intake credentials beside declared clusters", () => {
    expect(() =>
      parseNodeHostEnv({ KUBEFN_CLUSTERS: JSON.stringify([east]), AUDIT_TOKEN: "a".repeat(16) }),
    ).toThrow(/each cluster's auditToken and relaySecret are its own/);
  });
});
