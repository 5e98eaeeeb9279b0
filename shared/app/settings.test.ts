import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseAwsEnv } from "../../functions/aws/config.ts";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { nodeHostEnvSchema, parseNodeHostEnv } from "../../functions/node/config.ts";
import type { ZodMiniType } from "../zod/index.ts";
import {
  type PlatformCapabilities,
  parseEnvironment,
  platformSchema,
  SettingsError,
  settingsVariables,
} from "./settings.ts";

/** Each platform's own minimal variables (where the cluster and the queue are). */
const platforms = {
  workers: (env: Record<string, string>) =>
    parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t0ken", ...env }),
  lambda: (env: Record<string, string>) =>
    parseAwsEnv({
      AWS_REGION: "us-east-1",
      QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
      KUBECONFIG: "/var/task/kubeconfig",
      ...env,
    }),
  node: (env: Record<string, string>) => parseNodeHostEnv({ KUBECONFIG: "/tmp/kubeconfig", ...env }).settings,
};

const shared = {
  AUDIT_TOKEN: "a".repeat(16),
  RELAY_SECRET: "r".repeat(32),
  API_TOKEN: "t".repeat(20),
  SELF_USERNAMES: "system:serviceaccount:x:y, alice",
  MAX_BODY_BYTES: "65536",
  REPLAY_WINDOW_SECONDS: "120",
  SWEEP_PERIOD_SECONDS: "120",
  PROXY_RESYNC_SECONDS: "600",
  MIN_REPORT_SECONDS: "30",
  ORPHAN_GRACE_SECONDS: "0",
  PROBE_CONCURRENCY: "12",
  PASS_CONCURRENCY: "3",
  LOG_LEVEL: "warn",
  PROBE_ALLOWED_CIDRS: "10.20.0.0/16, ::1/128",
};
const expected = {
  auditToken: "a".repeat(16),
  relaySecret: "r".repeat(32),
  apiToken: "t".repeat(20),
  selfUsernames: ["system:serviceaccount:x:y", "alice"],
  maxBodyBytes: 65536,
  replayWindowSeconds: 120,
  sweepPeriodSeconds: 120,
  minReportIntervalSeconds: 30,
  orphanGraceSeconds: 0,
  probeConcurrency: 12,
  passConcurrency: 3,
  logLevel: "warn",
  operators: { proxy: { probeAllowList: { text: ["10.20.0.0/16", "::1/128"] }, resyncSeconds: 600 } },
};

describe("one settings schema, the same names on every platform", () => {
  it.each(Object.entries(platforms))("%s reads every shared setting under its one name", (_name, parse) => {
    expect(parse(shared)).toMatchObject(expected);
  });

  it.each(Object.entries(platforms))("%s names a bad shared setting in a SettingsError", (_name, parse) => {
    expect(() => parse({ MIN_REPORT_SECONDS: "never" })).toThrow(SettingsError);
    expect(() => parse({ MIN_REPORT_SECONDS: "never" })).toThrow(/MIN_REPORT_SECONDS/);
  });

  it.each(Object.entries(platforms))(
    "%s logs at info unless LOG_LEVEL says otherwise, and refuses a level it does not know",
    (_name, parse) => {
      expect(parse({}).logLevel).toBe("info");
      expect(parse({ LOG_LEVEL: "debug" }).logLevel).toBe("debug");
      expect(() => parse({ LOG_LEVEL: "verbose" })).toThrow(/LOG_LEVEL/);
    },
  );

  it("the sweep's defaults are the same on every platform: steady state costs the same everywhere", () => {
    const sweepDefaults = (s: ReturnType<typeof platforms.node>) => ({
      sweepPeriodSeconds: s.sweepPeriodSeconds,
      proxyResyncSeconds: s.operators.proxy?.resyncSeconds,
      probeShardSize: s.probeShardSize,
      requestBudget: s.requestBudget,
    });
    const defaults = {
      sweepPeriodSeconds: 60,
      proxyResyncSeconds: undefined,
      probeShardSize: 40,
      requestBudget: 1000,
    };
    for (const parse of Object.values(platforms)) expect(sweepDefaults(parse({}))).toEqual(defaults);
  });

  it.each(Object.entries(platforms))(
    "%s probes no internal destination by default; a bad PROBE_ALLOWED_CIDRS is named",
    (_name, parse) => {
      expect(parse({}).operators.proxy.probeAllowList.cidrs).toEqual([]);
      expect(() => parse({ PROBE_ALLOWED_CIDRS: "10.0.0.0/8,intranet" })).toThrow(
        /PROBE_ALLOWED_CIDRS: not a CIDR \(address\/bits\): intranet/,
      );
    },
  );

  it("the embedded devcluster (a laptop) admits loopback; a real cluster does not", () => {
    expect(parseNodeHostEnv({}).settings.operators.proxy.probeAllowList.text).toEqual([
      "127.0.0.0/8",
      "::1/128",
    ]);
    for (const real of [{ KUBECONFIG: "/tmp/k" }, { KUBERNETES_SERVICE_HOST: "10.96.0.1" }]) {
      expect(parseNodeHostEnv(real).settings.operators.proxy.probeAllowList.text).toEqual([]);
    }
  });

  it.each([
    ["workers", platforms.workers],
    ["lambda", platforms.lambda],
  ])("%s refuses a sweep period under a minute (its schedule runs every minute)", (_name, parse) => {
    expect(() => parse({ SWEEP_PERIOD_SECONDS: "30" })).toThrow(/SWEEP_PERIOD_SECONDS/);
  });
});

describe("parseNodeHostEnv", () => {
  it("takes the shared names with a KUBEFN_ prefix too, the prefixed one winning", () => {
    const { settings } = parseNodeHostEnv({
      AUDIT_TOKEN: "x".repeat(16),
      KUBEFN_AUDIT_TOKEN: "y".repeat(16),
    });
    expect(settings.auditToken).toBe("y".repeat(16));
  });

  it("still reads KUBEFN_SWEEP_SECONDS and KUBEFN_CONCURRENCY", () => {
    const { settings } = parseNodeHostEnv({ KUBEFN_SWEEP_SECONDS: "5", KUBEFN_CONCURRENCY: "2" });
    expect([settings.sweepPeriodSeconds, settings.passConcurrency]).toEqual([5, 2]);
  });

  it.each([
    [{}, 10],
    [{ KUBECONFIG: "/tmp/kubeconfig" }, 60],
  ])("sweeps every 10 s on the embedded devcluster, else every minute (%j → %s)", (env, seconds) => {
    expect(parseNodeHostEnv(env).settings.sweepPeriodSeconds).toBe(seconds);
  });

  it("fills the host's own defaults", () => {
    expect(parseNodeHostEnv({})).toMatchObject({
      host: "127.0.0.1",
      port: 8080,
      install: false,
      logFormat: "text",
      settings: {
        passConcurrency: 3,
        probeConcurrency: 32,
        selfUsernames: ["system:serviceaccount:kubefn-system:kubefn"],
      },
    });
  });
});

describe("Pub/Sub push intake settings", () => {
  const jwks = { keys: [{ kty: "RSA", kid: "k1", n: "AQAB", e: "AQAB" }] };
  it.each(Object.entries(platforms))(
    "%s: on with an audience and a service account, keys inline or by URL",
    (_n, parse) => {
      expect(
        parse({
          PUBSUB_AUDIENCE: "https://kubefn.example.com/v1/events/pubsub",
          PUBSUB_SERVICE_ACCOUNT: "kubefn-push@p.iam.gserviceaccount.com",
          PUBSUB_JWKS: JSON.stringify(jwks),
        }).pubsub,
      ).toEqual({
        audience: "https://kubefn.example.com/v1/events/pubsub",
        serviceAccountEmail: "kubefn-push@p.iam.gserviceaccount.com",
        jwks,
      });
      expect(
        parse({
          PUBSUB_AUDIENCE: "a",
          PUBSUB_SERVICE_ACCOUNT: "s@p.iam.gserviceaccount.com",
          PUBSUB_JWKS_URL: "http://127.0.0.1:1/certs",
        }).pubsub?.jwksUrl,
      ).toBe("http://127.0.0.1:1/certs");
      expect(parse({ PUBSUB_AUDIENCE: "a" }).pubsub).toBeUndefined();
    },
  );

  it.each([
    [{ PUBSUB_SERVICE_ACCOUNT: "not-an-email" }, /PUBSUB_SERVICE_ACCOUNT/],
    [{ PUBSUB_JWKS: "{}" }, /PUBSUB_JWKS/],
    [{ PUBSUB_JWKS_URL: "ftp://x" }, /PUBSUB_JWKS_URL/],
    [{ PUBSUB_JWKS_URL: "http://keys.example.com/certs" }, /PUBSUB_JWKS_URL must be an https URL/],
  ])("a bad %j is named", (env, name) => {
    expect(() => platforms.workers(env)).toThrow(name);
  });

  it("the Node host reads them KUBEFN_-prefixed too", () => {
    expect(
      platforms.node({
        KUBEFN_PUBSUB_AUDIENCE: "a",
        KUBEFN_PUBSUB_SERVICE_ACCOUNT: "s@p.iam.gserviceaccount.com",
      }).pubsub,
    ).toMatchObject({ audience: "a", serviceAccountEmail: "s@p.iam.gserviceaccount.com" });
  });
});

describe("platformSchema: what a platform cannot do is refused by name", () => {
  const parse = (can: PlatformCapabilities, env: Record<string, string>) =>
    parseEnvironment(platformSchema({}, can), env, "invalid environment");

  it("a minute schedule refuses a sweep period below 60 s; without one it is allowed", () => {
    expect(() => parse({ minuteSchedule: true }, { SWEEP_PERIOD_SECONDS: "10" })).toThrow(
      /SWEEP_PERIOD_SECONDS: SWEEP_PERIOD_SECONDS must be at least 60/,
    );
    expect(parse({}, { SWEEP_PERIOD_SECONDS: "10" }).SWEEP_PERIOD_SECONDS).toBe(10);
  });

  it("probe shards of 40 by default on every platform; 0 probes in the sweep", () => {
    for (const platform of Object.values(platforms)) expect(platform({}).probeShardSize).toBe(40);
    expect(parse({}, { PROBE_SHARD_SIZE: "0" }).PROBE_SHARD_SIZE).toBe(0);
    expect(parse({}, { PROBE_SHARD_SIZE: "1000" }).PROBE_SHARD_SIZE).toBe(1000);
    expect(() => parse({}, { PROBE_SHARD_SIZE: "1001" })).toThrow(/PROBE_SHARD_SIZE/);
  });
});

describe("the settings tables of docs/settings.md", () => {
  /** Each row of the page's tables: the variables it names and the defaults it gives, in order. */
  const section = readFileSync(new URL("../../docs/settings.md", import.meta.url), "utf8");
  const ticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const rows = section
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => line.split(" | "))
    .map(([names = "", defaults = ""]) => ({ names: ticked(names), defaults: ticked(defaults) }));
  const documented = new Map(
    rows.flatMap(({ names, defaults }) => names.map((name, i) => [name, defaults[i]] as const)),
  );
  const shape: Record<string, ZodMiniType> = nodeHostEnvSchema.def.shape;

  it("names every variable the Node host and the shared schema read, and none they do not", () => {
    expect([...documented.keys()].sort()).toEqual(Object.keys(shape).sort());
    for (const name of Object.keys(settingsVariables)) expect(documented.has(name), name).toBe(true);
  });

  it.each(Object.keys(shape))("gives %s the schema's default", (name) => {
    const parsed = shape[name]!.safeParse(undefined);
    const value = parsed.success ? parsed.data : undefined;
    if (value === undefined) return; // a default decided further in (a controller's); the row says which
    expect(documented.get(name)).toBe(Array.isArray(value) ? value.join(",") : String(value));
  });
});
