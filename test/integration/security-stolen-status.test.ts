/**
 * Issue 20, "A stolen kubefn token", the status: kubefn's own token (used outside kubefn) may write
 * `proxies/status` — the admission policy `kubefn-state-is-kubefns` and intake's `selfUsernames`
 * take its writes for kubefn's — so it can set an `ip` of its choosing and `phase: Ready`, and
 * crawlers are sent there. Without the status seal that stands until the next drift pass (a day
 * here). With it, the write's audit event (level RequestResponse for `*\/status`) shows a status
 * without kubefn's seal, intake sends a pass, and the pass rewrites the status from what kubefn
 * observes, with a Warning Event and a log line naming the write — within seconds.
 *
 * The Node host runs as kubefn's ServiceAccount with sweeps an hour apart and Proxy drift passes a
 * day apart, so only intake can bring that pass.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { isNotFound, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createStatusSeal } from "../../shared/runtime/core/index.ts";
import { FOREIGN_STATUS_REASON } from "../../shared/runtime/pass/index.ts";
import { type AuditRelay, startAuditRelay } from "../chaos/drivers.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { adminKube, kubefnKube } from "../security/tenants.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { subPoolObject } from "../support/subpools.ts";

const suffix = Date.now().toString(36);
const ns = `stolen-status-${suffix}`;
const name = "tenant-proxy";
const key = { namespace: ns, name };
const pool = `stolen-status-${suffix}`;
const auditToken = randomBytes(16).toString("hex");
const sealKey = randomBytes(24).toString("hex");

type ProxyObject = KubeObject & {
  status?: {
    ip?: string;
    phase?: string;
    seal?: string;
    conditions?: Array<{ type: string; status: string }>;
  };
};

let admin: Kube;
let thief: Kube;
let host: HostProcess | undefined;
let audit: AuditRelay | undefined;

beforeAll(async () => {
  admin = adminKube();
  thief = await kubefnKube(admin);
  const { kubeconfig, auditCollector } = clusterInfo();
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(kubeconfig),
    KUBEFN_AUDIT_TOKEN: auditToken,
    KUBEFN_STATUS_SEAL_KEY: sealKey,
    KUBEFN_SWEEP_SECONDS: "3600",
    KUBEFN_PROXY_RESYNC_SECONDS: "86400",
  });
  audit = await startAuditRelay(() => (host ? { url: host.url, auditToken } : undefined));
  await audit.pollCollector(auditCollector);
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await optInNamespace(admin, ns);
}, 240_000);

/** Deletes a primary and waits until it is gone (kubefn, still running, takes its finalizer off). */
async function deleted(res: typeof proxyResource, k: { namespace?: string; name: string }): Promise<void> {
  await admin?.delete(res, k).catch(() => undefined);
  await eventually(
    `${k.namespace ?? ""}/${k.name} deleted`,
    async () => {
      try {
        await admin.get(res, k);
        return undefined;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    },
    90_000,
  ).catch(() => undefined);
}

afterAll(async () => {
  // The primaries go first, while kubefn runs to take its finalizers off.
  await deleted(proxyResource, key);
  await deleted(subPoolResource, { name: pool });
  await audit?.close();
  expect(await host?.stop()).toBe(0);
  await admin?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
}, 120_000);

describe("attack 6: a status written with kubefn's token outside kubefn", () => {
  it("an ip of the thief's choosing and phase Ready on a Proxy are rewritten within seconds, with a Warning Event and a log line", async () => {
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name, namespace: ns },
      spec: {
        mode: "External",
        endpoint: { host: "127.0.0.1", port: 9, scheme: "http" },
        // Nothing listens there: kubefn never calls this Proxy Ready.
        healthCheck: { probeURL: "http://127.0.0.1:9/", intervalSeconds: 3600 },
      },
    });
    const kubefns = await eventually("kubefn's status of the Proxy", async () => {
      const p = await admin.get<ProxyObject>(proxyResource, key);
      return p.status?.ip === "127.0.0.1" && p.status.seal ? p : undefined;
    });
    expect(kubefns.status?.phase).not.toBe("Ready");
    // kubefn's own status verifies with its key, as stored: its own writes bring no pass.
    expect(await createStatusSeal(sealKey).verify(kubefns)).toBe("sealed");

    const forged = await thief.patchStatus<ProxyObject>(proxyResource, key, {
      type: "merge",
      body: { status: { ip: "203.0.113.66", phase: "Ready" } },
    });
    expect(forged.status).toMatchObject({ ip: "203.0.113.66", phase: "Ready" });

    const restored = await eventually(
      "the forged status rewritten",
      async () => {
        const p = await admin.get<ProxyObject>(proxyResource, key);
        return p.status?.ip === "127.0.0.1" ? p : undefined;
      },
      20_000,
    );
    // Only intake could bring that pass: the next sweep is an hour away, the drift pass a day.
    expect(restored.status?.phase).toBe(kubefns.status?.phase);
    expect(await createStatusSeal(sealKey).verify(restored)).toBe("sealed");

    const line = await host!.waitFor(
      (l) => l.msg.startsWith("status not written by kubefn") && l.key === `proxy/${ns}/${name}`,
      10_000,
    );
    expect(line.resourceVersion).toBe(forged.metadata.resourceVersion);
    const warning = await eventually(
      "a Warning Event about the forged status",
      async () => {
        const listed = await admin.list<KubeObject & { type?: string; reason?: string; note?: string }>(
          Resources.Event,
          { namespace: ns, fieldSelector: `regarding.name=${name}` },
        );
        return listed.items.find((e) => e.type === "Warning" && e.reason === FOREIGN_STATUS_REASON);
      },
      10_000,
    );
    expect(warning.note).toContain(`resourceVersion ${forged.metadata.resourceVersion}`);
  });

  it("a SubPool's status (a hostname and a Service of the thief's) is rewritten the same way", async () => {
    await admin.create(
      subPoolResource,
      subPoolObject({}, { name: pool, uid: undefined, generation: undefined }),
    );
    const poolKey = { name: pool };
    const kubefns = await eventually(
      "kubefn's status of the SubPool",
      async () => {
        const p = await admin.get<KubeObject & { status?: Record<string, unknown> }>(
          subPoolResource,
          poolKey,
        );
        return p.status?.cpaService && p.status.seal ? p : undefined;
      },
      90_000,
    );
    expect(kubefns.status?.hostname).toBeUndefined();
    const forged = await thief.patchStatus(subPoolResource, poolKey, {
      type: "merge",
      body: { status: { hostname: "login.bank.example", cpaService: "attacker.example:443" } },
    });
    const restored = await eventually(
      "the forged SubPool status rewritten",
      async () => {
        const p = await admin.get<KubeObject & { status?: Record<string, unknown> }>(
          subPoolResource,
          poolKey,
        );
        return p.status?.cpaService === kubefns.status?.cpaService ? p : undefined;
      },
      20_000,
    );
    expect(restored.status?.hostname).toBeUndefined();
    expect(await createStatusSeal(sealKey).verify(restored)).toBe("sealed");
    await host!.waitFor(
      (l) =>
        l.msg.startsWith("status not written by kubefn") &&
        l.key === `subpool//${pool}` &&
        l.resourceVersion === forged.metadata.resourceVersion,
      10_000,
    );
  });

  it("kubefn's own status writes bring no pass (steady state: no extra messages)", async () => {
    const passesOf = () =>
      host!.lines.filter((l) => l.msg === "pass" && l.key === `proxy/${ns}/${name}`).length;
    const before = passesOf();
    const stored = await admin.get<ProxyObject>(proxyResource, key);
    // The audit relay polls every 500 ms; give the last writes' events time to arrive.
    await new Promise((r) => setTimeout(r, 3000));
    expect(passesOf()).toBe(before);
    expect((await admin.get<ProxyObject>(proxyResource, key)).metadata.resourceVersion).toBe(
      stored.metadata.resourceVersion,
    );
  });
});
