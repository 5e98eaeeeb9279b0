/**
 * The relay path end to end: the watch relay (infra/relay, in-process, admin kubeconfig, the kinds
 * the real registry needs) list-watches the devcluster and posts signed RelayBatches to the Node
 * host's `/v1/events`; the host (a separate process, as the ServiceAccount, sweep an hour away so
 * no drift pass can help) maps them and runs the passes. With `kubectl apply` an External Proxy
 * converges (Provisioned=True), a spec edit is followed by its status, and a delete reaches a pass
 * that finds it absent. (The audit-webhook path is shown in node-host.test.ts.)
 */

import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayKindsFor } from "../../infra/relay/kinds.ts";
import { createRelay, type Relay } from "../../infra/relay/relay.ts";
import { clientNodeWatchStream } from "../../infra/relay/watch-stream.ts";
import { createOperators } from "../../shared/app/operators.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, findCondition, isNotFound, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import type { Log } from "../../shared/runtime/index.ts";
import { clusterInfo, eventually, kubeConfig, kubectl } from "../setup/cluster.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type ProxyObject = KubeObject & {
  status?: {
    ip?: string;
    phase?: string;
    conditions?: Array<{ type: string; status: string; reason?: string }>;
  };
};

const secret = randomBytes(24).toString("hex");
const ns = `relayhost-${randomBytes(3).toString("hex")}`;
const quiet: Log = { info() {}, warn: (m, f) => console.warn(m, f), error: (m, f) => console.error(m, f) };

let admin: Kube;
let host: HostProcess;
let relay: Relay;

const yaml = (host: string, port: number) => `apiVersion: crawl.kubefn.dev/v1alpha1
kind: Proxy
metadata:
  name: edge
  namespace: ${ns}
spec:
  mode: External
  endpoint:
    host: ${host}
    port: ${port}
    scheme: http
`;

const get = (name: string) => admin.get<ProxyObject>(proxyResource, { namespace: ns, name });
const key = `proxy/${ns}/edge`;

async function relayBatches(): Promise<number> {
  const text = await (await fetch(`${host.url}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("kubefn_intake_batches_total") && l.includes('"relay"'));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()));
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig),
    KUBEFN_RELAY_SECRET: secret,
    KUBEFN_SWEEP_SECONDS: "3600",
  });
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });

  const kinds = relayKindsFor(
    createOperators({
      probeAllowList: loopbackProbeAllowList,
      prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
      sweepPeriodSeconds: 60,
    }).registry,
  );
  relay = createRelay({
    kinds,
    kube: admin,
    stream: clientNodeWatchStream(kubeConfig(), { timeoutSeconds: 60 }),
    intakeUrl: `${host.url}/v1/events`,
    secret,
    batch: { maxEvents: 50, maxDelayMs: 200 },
    bufferSize: 1000,
    backoff: { baseMs: 200, maxMs: 1000 },
    log: quiet,
  });
  relay.start();
  await eventually(async () => (relay.synced() ? true : undefined), { what: "relay synced" });
}, 180_000);

afterAll(async () => {
  await relay?.stop();
  expect(await host?.stop()).toBe(0);
  await admin?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
});

describe("relay → intake → pass, with no sweep to help", () => {
  it("kubectl apply → Provisioned; edit → status follows; delete → gone, with a pass that finds it absent", async () => {
    const started = performance.now();
    // The host's first sweep runs right after it starts listening; count from after it.
    await host.waitFor((l) => l.msg === "sweep");
    const sweepsAtStart = host.lines.filter((l) => l.msg === "sweep").length;
    const relayedBefore = await relayBatches();

    const applied = await kubectl(["apply", "-f", "-"], yaml("127.0.0.1", 3128));
    expect(applied.code, applied.stderr).toBe(0);
    const p = await eventually(
      async () => {
        const got = await get("edge");
        return findCondition(got.status?.conditions as never, "Provisioned")?.status === "True"
          ? got
          : undefined;
      },
      { timeoutMs: 30_000, what: "Provisioned=True" },
    );
    expect(findCondition(p.status?.conditions as never, "Provisioned")?.reason).toBe("ExternalEndpoint");
    expect(p.status?.ip).toBe("127.0.0.1");
    const createdMs = Math.round(performance.now() - started);
    await host.waitFor((l) => l.msg === "pass" && l.key === key, 5_000);

    const edited = await kubectl(["apply", "-f", "-"], yaml("127.0.0.2", 8080));
    expect(edited.code, edited.stderr).toBe(0);
    const after = await eventually(
      async () => {
        const got = await get("edge");
        return got.status?.ip === "127.0.0.2" ? got : undefined;
      },
      { timeoutMs: 30_000, what: "status.ip following the edit" },
    );
    expect(after.metadata.generation).toBe(2);
    expect((after.status as { observedGeneration?: number }).observedGeneration).toBe(2);
    const editedMs = Math.round(performance.now() - started);

    const passesBefore = host.lines.length;
    const deleted = await kubectl(["delete", "proxy", "edge", "-n", ns, "--wait=true"]);
    expect(deleted.code, deleted.stderr).toBe(0);
    await eventually(
      async () => {
        try {
          await get("edge");
          return undefined;
        } catch (err) {
          if (isNotFound(err)) return true;
          throw err;
        }
      },
      { timeoutMs: 30_000, what: "the Proxy gone" },
    );
    const absent = await host.waitFor(
      (l) => host.lines.indexOf(l) >= passesBefore && l.msg === "pass" && l.key === key && l.absent === true,
      10_000,
    );
    expect(absent.result).toBe("done");

    // Only the relay brought these passes: no sweep ran after the host's first, and intake
    // counted relay batches.
    expect(host.lines.filter((l) => l.msg === "sweep").length).toBe(sweepsAtStart);
    const relayed = (await relayBatches()) - relayedBefore;
    expect(relayed).toBeGreaterThanOrEqual(3);
    const passes = host.lines.filter((l) => l.msg === "pass" && l.key === key);
    expect(passes.filter((l) => l.result === "error")).toEqual([]);
    console.log(
      `relay-host: Provisioned after ${createdMs} ms, edit followed at ${editedMs} ms, ` +
        `deleted at ${Math.round(performance.now() - started)} ms; relay batches=${relayed} passes=${passes.length}`,
    );
  });
});
