/**
 * The fault proxy (test/support/fault-proxy.ts) in front of the devcluster's API server: each
 * fault, as the Kube port sees it, and the write-succeeded-but-response-lost case checked in etcd
 * through an unfaulted client.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  createFetchTransport,
  createKube,
  type Kube,
  NetworkError,
  NotFoundError,
  Resources,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
} from "../../shared/kube/index.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";

let faults: FaultProxy;
let direct: Kube;
let viaFaults: Kube;
let ns: string;

const configMap = (name: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns },
  data: { payload: "x".repeat(4096) },
});

beforeAll(async () => {
  const { httpProxy, adminToken } = clusterInfo();
  faults = await startFaultProxy(httpProxy);
  direct = createKube(createFetchTransport({ server: httpProxy, token: adminToken }));
  viaFaults = createKube(createFetchTransport({ server: faults.url, token: adminToken, timeoutMs: 1000 }));
  ns = `faults-${randomBytes(3).toString("hex")}`;
  await direct.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
});

afterAll(async () => {
  await faults?.close();
  await direct?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
});

beforeEach(() => {
  faults.configure({ rate: 0 });
  faults.onForwarded(undefined);
  faults.resetStats();
});

describe("fault proxy", () => {
  it("passes requests through unchanged with no faults", async () => {
    await viaFaults.create(Resources.ConfigMap, configMap("plain"));
    const got = await viaFaults.get(Resources.ConfigMap, { namespace: ns, name: "plain" });
    expect(got.metadata.uid).toBeTruthy();
    expect(faults.stats()).toMatchObject({ requests: 2, reads: 1, writes: 1, forwarded: 2, faulted: 0 });
  });

  it.each([
    ["500", ServerError, undefined],
    ["503", ServerError, 4],
    ["504", TimeoutError, undefined],
    ["429", TooManyRequestsError, 4],
  ] as const)("answers %s without forwarding", async (kind, errorType, retryAfter) => {
    faults.configure({ rate: 1, mix: { [kind]: 1 }, retryAfterSeconds: 4 });
    const err = await viaFaults.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(errorType);
    expect((err as ServerError).status).toBe(Number(kind));
    if (retryAfter !== undefined) {
      expect(
        (err as TooManyRequestsError).retryAfterSeconds ?? (err as ServerError).details?.retryAfterSeconds,
      ).toBe(retryAfter);
    }
    expect(faults.stats()).toMatchObject({ requests: 1, forwarded: 0, faulted: 1 });
  });

  it("resets the connection mid-body: the client sees a network failure", async () => {
    await direct.create(Resources.ConfigMap, configMap("big"));
    faults.configure({ rate: 1, mix: { reset: 1 } });
    const err = await viaFaults
      .get(Resources.ConfigMap, { namespace: ns, name: "big" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect(faults.stats().byFault.reset).toBe(1);
  });

  it("holds a slow answer past the client's deadline", async () => {
    faults.configure({ rate: 1, mix: { slow: 1 }, slowMs: 2500 });
    const err = await viaFaults.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as TimeoutError).reason).toBe("ClientTimeout");
  });

  it("write succeeded, response lost: the object is in etcd, the client saw a reset", async () => {
    faults.configure({ rate: 1, mix: { lost: 1 }, methods: ["POST"] });
    const err = await viaFaults.create(Resources.ConfigMap, configMap("lost")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    const stored = await direct.get(Resources.ConfigMap, { namespace: ns, name: "lost" });
    expect(stored.metadata.name).toBe("lost");
    expect(faults.seen()[0]).toMatchObject({ method: "POST", fault: "lost", upstreamStatus: 201 });
  });

  it("onForwarded sees each forwarded write with the upstream's status and can drop the answer", async () => {
    const seen: string[] = [];
    faults.onForwarded((req) => {
      seen.push(`${req.method} ${req.upstreamStatus}`);
      return req.method === "DELETE" ? "reset" : "answer";
    });
    await viaFaults.create(Resources.ConfigMap, configMap("hooked"));
    const err = await viaFaults
      .delete(Resources.ConfigMap, { namespace: ns, name: "hooked" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    await expect(direct.get(Resources.ConfigMap, { namespace: ns, name: "hooked" })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect(seen).toEqual(["POST 201", "DELETE 200"]);
  });

  it("is configured over HTTP too, and refuses a bad plan", async () => {
    const bad = await fetch(`${faults.url}/__faults`, { method: "PUT", body: JSON.stringify({ rate: 3 }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: "rate must be a number in [0, 1]" });
    const ok = await fetch(`${faults.url}/__faults`, {
      method: "PUT",
      body: JSON.stringify({ rate: 1, mix: { "500": 1 }, methods: ["DELETE"] }),
    });
    expect(ok.status).toBe(200);
    await viaFaults.get(Resources.Namespace, { name: ns });
    await expect(
      viaFaults.delete(Resources.ConfigMap, { namespace: ns, name: "plain" }),
    ).rejects.toBeInstanceOf(ServerError);
    const state = (await (await fetch(`${faults.url}/__faults`)).json()) as {
      stats: { requests: number; faulted: number };
    };
    expect(state.stats).toMatchObject({ requests: 2, faulted: 1 });
  });
});
