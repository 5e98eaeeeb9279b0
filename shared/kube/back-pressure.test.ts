import { describe, expect, it } from "vitest";
import { createApiGuard, guardedKube } from "./back-pressure.ts";
import { classifyError } from "./classify.ts";
import { ClientThrottledError } from "./errors.ts";
import { createKube } from "./kube.ts";
import type { Transport, TransportRequest, TransportResponse } from "./port.ts";
import { Resources } from "./resources.ts";

/** A scripted API server: answers with `status()` and counts what reached it. */
function scripted(status: () => number | "throw", headers: Record<string, string> = {}) {
  const reached: TransportRequest[] = [];
  const transport: Transport = {
    async request(req): Promise<TransportResponse> {
      reached.push(req);
      const s = status();
      if (s === "throw") throw new TypeError("fetch failed");
      return {
        status: s,
        headers: new Headers(headers),
        body: s < 300 ? '{"kind":"Namespace","metadata":{}}' : "",
      };
    },
  };
  return { transport, reached };
}

const get = (t: Transport) => createKube(t).get(Resources.Namespace, { name: "x" });

describe("createApiGuard", () => {
  it("opens after the threshold of failures in a row and holds requests back, classified transient with the time left", async () => {
    let t = 0;
    const server = scripted(() => 503);
    const guard = createApiGuard(server.transport, { failureThreshold: 3, openSeconds: 10 }, () => t);
    const kube = guard.invocation();
    for (let i = 0; i < 3; i++) await expect(get(kube)).rejects.toThrow();
    expect(guard.stats().state).toBe("open");
    t = 4000;
    const held = await get(kube).catch((e: unknown) => e);
    expect(held).toBeInstanceOf(ClientThrottledError);
    expect(classifyError(held)).toEqual({ class: "transient", reason: "CircuitOpen", retryAfterSeconds: 6 });
    expect(server.reached).toHaveLength(3);
    expect(guard.stats()).toMatchObject({ opened: 1, heldBack: 1 });
  });

  it.each([
    ["a 404", 404, "closed"],
    ["a 409", 409, "closed"],
    ["a 429", 429, "open"],
    ["a 500", 500, "open"],
    ["no answer", "throw", "open"],
  ] as const)("%s counts as %s", async (_, status, state) => {
    const guard = createApiGuard(scripted(() => status).transport, { failureThreshold: 2 }, () => 0);
    for (let i = 0; i < 2; i++) await get(guard.invocation()).catch(() => undefined);
    expect(guard.stats().state).toBe(state);
  });

  it("an answer in between resets the count: 20 % random failures never open it", async () => {
    let n = 0;
    const server = scripted(() => (n++ % 5 === 0 ? 503 : 200));
    const guard = createApiGuard(server.transport, { failureThreshold: 3 }, () => 0);
    for (let i = 0; i < 100; i++) await get(guard.invocation()).catch(() => undefined);
    expect(guard.stats()).toMatchObject({ state: "closed", opened: 0, heldBack: 0 });
    expect(server.reached).toHaveLength(100);
  });

  it("half-open lets one trial through; a failed trial re-opens for twice as long, an answer closes", async () => {
    let t = 0;
    let status = 503;
    const server = scripted(() => status);
    const guard = createApiGuard(server.transport, { failureThreshold: 1, openSeconds: 5 }, () => t);
    await get(guard.invocation()).catch(() => undefined);
    t = 5000;
    expect(guard.stats().state).toBe("half-open");
    await expect(get(guard.invocation())).rejects.not.toBeInstanceOf(ClientThrottledError);
    expect(guard.stats().state).toBe("open");
    t = 14_000;
    expect(guard.stats().state).toBe("open");
    t = 15_000;
    status = 200;
    await get(guard.invocation());
    expect(guard.stats()).toMatchObject({ state: "closed", opened: 2 });
    expect(server.reached).toHaveLength(3);
  });

  it("only one trial at a time while half-open", async () => {
    let t = 0;
    let release: () => void = () => undefined;
    let calls = 0;
    const inner: Transport = {
      request: () => {
        calls++;
        if (calls === 1) return Promise.resolve({ status: 503, headers: new Headers(), body: "" });
        return new Promise((resolve) => {
          release = () => resolve({ status: 200, headers: new Headers(), body: "{}" });
        });
      },
    };
    const guard = createApiGuard(inner, { failureThreshold: 1, openSeconds: 1 }, () => t);
    await get(guard.invocation()).catch(() => undefined);
    t = 1000;
    const trial = get(guard.invocation());
    await expect(get(guard.invocation())).rejects.toBeInstanceOf(ClientThrottledError);
    release();
    await trial;
    expect(guard.stats().state).toBe("closed");
  });

  it("a trial that never comes back (its invocation was cut off mid-request) is taken as lost after the longest open period", async () => {
    let t = 0;
    let calls = 0;
    const inner: Transport = {
      request: () => {
        calls++;
        if (calls === 1) return Promise.resolve({ status: 503, headers: new Headers(), body: "" });
        if (calls === 2) return new Promise(() => undefined);
        return Promise.resolve({ status: 200, headers: new Headers(), body: "{}" });
      },
    };
    const guard = createApiGuard(inner, { failureThreshold: 1, openSeconds: 1, maxOpenSeconds: 30 }, () => t);
    await get(guard.invocation()).catch(() => undefined);
    t = 1000;
    void get(guard.invocation());
    t = 30_999;
    await expect(get(guard.invocation())).rejects.toBeInstanceOf(ClientThrottledError);
    t = 31_000;
    await get(guard.invocation());
    expect(calls).toBe(3);
    expect(guard.stats().state).toBe("closed");
  });

  it("stays open at least as long as the server's Retry-After", async () => {
    let t = 0;
    const guard = createApiGuard(
      scripted(() => 429, { "retry-after": "30" }).transport,
      { failureThreshold: 1 },
      () => t,
    );
    await get(guard.invocation()).catch(() => undefined);
    t = 29_000;
    expect(guard.stats().state).toBe("open");
    t = 30_000;
    expect(guard.stats().state).toBe("half-open");
  });

  it("a budget per invocation: the request past it is not sent, other invocations have their own", async () => {
    const server = scripted(() => 200);
    const guard = createApiGuard(server.transport);
    const first = guard.invocation(2);
    await get(first);
    await get(first);
    const over = await get(first).catch((e: unknown) => e);
    expect(classifyError(over)).toEqual({ class: "transient", reason: "RequestBudgetExhausted" });
    await get(guard.invocation(2));
    expect(server.reached).toHaveLength(3);
    expect(guard.stats().overBudget).toBe(1);
  });

  it("guardedKube: each invocationKube has its own budget; `kube` has none; one circuit for all", async () => {
    let status = 200;
    const server = scripted(() => status);
    const { kube, invocationKube, guard } = guardedKube(server.transport, {
      requestBudget: 1,
      circuit: { failureThreshold: 2 },
    });
    const pass = invocationKube();
    await pass.get(Resources.Namespace, { name: "x" });
    await expect(pass.get(Resources.Namespace, { name: "x" })).rejects.toBeInstanceOf(ClientThrottledError);
    for (let i = 0; i < 3; i++) await kube.get(Resources.Namespace, { name: "x" });
    status = 503;
    await invocationKube()
      .get(Resources.Namespace, { name: "x" })
      .catch(() => undefined);
    await kube.get(Resources.Namespace, { name: "x" }).catch(() => undefined);
    expect(guard.stats().state).toBe("open");
    await expect(invocationKube().get(Resources.Namespace, { name: "x" })).rejects.toMatchObject({
      reason: "CircuitOpen",
    });
    expect(server.reached).toHaveLength(6);
  });
});

describe("retries inside an invocation (client-go's policy)", () => {
  const noWait = async () => {};
  const write = (t: Transport) =>
    createKube(t).create(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "x", namespace: "ns" },
    });

  /** Answers `statuses` in turn, then 200. */
  function sequence(statuses: Array<number | "throw">, headers: Record<string, string> = {}) {
    let i = 0;
    return scripted(() => statuses[i++] ?? 200, headers);
  }

  it.each([
    ["GET answered 500, then 200", "GET", [500], 2],
    ["GET with no answer (reset, timeout), then 200", "GET", ["throw"], 2],
    ["GET answered 503 twice, then 200", "GET", [503, 503], 3],
    ["POST answered 429 (not processed), then 200", "POST", [429], 2],
    ["POST answered 503 (not processed), then 200", "POST", [503], 2],
  ] as const)("%s: sent again, and succeeds", async (_, method, statuses, sent) => {
    const server = sequence([...statuses]);
    const guard = createApiGuard(server.transport, { maxRetries: 2 }, Date.now, noWait);
    await (method === "GET" ? get(guard.invocation()) : write(guard.invocation()));
    expect(server.reached).toHaveLength(sent);
    expect(guard.stats().retried).toBe(sent - 1);
  });

  it.each([
    ["POST answered 500 (it may have been written)", "POST", 500],
    ["POST with no answer", "POST", "throw"],
    ["GET answered 404", "GET", 404],
  ] as const)("%s: not sent again", async (_, method, status) => {
    const server = sequence([status]);
    const guard = createApiGuard(server.transport, { maxRetries: 2 }, Date.now, noWait);
    await expect(method === "GET" ? get(guard.invocation()) : write(guard.invocation())).rejects.toThrow();
    expect(server.reached).toHaveLength(1);
  });

  it("waits the server's Retry-After when it is short; a longer one ends the request (the follow-up waits)", async () => {
    const waits: number[] = [];
    const sleep = async (ms: number) => void waits.push(ms);
    const short = sequence([429], { "retry-after": "1" });
    await get(createApiGuard(short.transport, { maxRetries: 2 }, Date.now, sleep).invocation());
    expect(waits).toEqual([1000]);
    const long = sequence([429], { "retry-after": "30" });
    const err = await get(
      createApiGuard(long.transport, { maxRetries: 2 }, Date.now, sleep).invocation(),
    ).catch((e: unknown) => e);
    expect(classifyError(err)).toMatchObject({ class: "transient", retryAfterSeconds: 30 });
    expect(long.reached).toHaveLength(1);
  });

  it("gives up after maxRetries; every retry spends the budget; the circuit stops the retrying", async () => {
    const always = scripted(() => 503);
    const guard = createApiGuard(
      always.transport,
      { maxRetries: 2, failureThreshold: 100 },
      Date.now,
      noWait,
    );
    await expect(get(guard.invocation())).rejects.toThrow();
    expect(always.reached).toHaveLength(3);

    const budgeted = scripted(() => 503);
    const small = createApiGuard(
      budgeted.transport,
      { maxRetries: 5, failureThreshold: 100 },
      Date.now,
      noWait,
    );
    await expect(get(small.invocation(2))).rejects.toThrow();
    expect(budgeted.reached).toHaveLength(2);

    const failing = scripted(() => 503);
    const tripping = createApiGuard(
      failing.transport,
      { maxRetries: 5, failureThreshold: 2 },
      Date.now,
      noWait,
    );
    await expect(get(tripping.invocation())).rejects.toMatchObject({ reason: "CircuitOpen" });
    expect(failing.reached).toHaveLength(2);
  });
});
