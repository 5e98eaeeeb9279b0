/**
 * controller-runtime's reconcile families, counted by the pass executor (so on every platform):
 * `controller_runtime_reconcile_total{controller,result}`, `controller_runtime_reconcile_errors_total`
 * and `controller_runtime_reconcile_time_seconds`, beside kubefn's own `kubefn_passes_total`.
 */
import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../../shared/app/telemetry/index.ts";
import { ServerError } from "../../../shared/kube/errors.ts";
import {
  awaitSweep,
  type ControllerDefinition,
  createRegistry,
  done,
  failed,
  type Outcome,
  type PassResult,
  requeueAfter,
  runJob,
  runPass,
} from "../../../shared/runtime/index.ts";
import { reconcileResultOf } from "../../../shared/runtime/pass/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";
import { ProxyResource, proxyController } from "./controllers.ts";

describe("reconcileResultOf", () => {
  it.each([
    [{ result: "done" }, "success"],
    [{ result: "awaitSweep" }, "success"],
    [{ result: "latched" }, "success"],
    [{ result: "requeue", followUpSeconds: 0 }, "requeue"],
    [{ result: "requeue", followUpSeconds: 30 }, "requeue_after"],
    [{ result: "requeue" }, "requeue_after"],
    [{ result: "error", followUpSeconds: 2 }, "error"],
    [{ result: "error" }, "error"],
  ] as [Pick<PassResult, "result" | "followUpSeconds">, string][])("%j → %s", (summary, result) => {
    expect(reconcileResultOf(summary)).toBe(result);
  });
});

describe("the executor counts controller-runtime's reconcile families", () => {
  async function passWith(outcome: () => Outcome, metrics = new PrometheusMetrics()) {
    const kube = new FakeKube();
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "u1", generation: 1 },
      status: { observedGeneration: 1 },
    });
    const { ctx } = fakeContext(kube);
    const reconcile: ControllerDefinition["reconcile"] = async () => outcome();
    const registry = createRegistry([proxyController({ reconcile, resyncSeconds: 300 })]);
    await runPass({ ...ctx, metrics }, registry, {
      request: { controller: "proxy", namespace: "ns1", name: "p1" },
      attempt: 0,
    });
    return metrics;
  }

  it.each([
    ["done", () => done(), "success"],
    ["awaitSweep", () => awaitSweep(), "success"],
    ["requeueAfter(0)", () => requeueAfter(0), "requeue"],
    ["requeueAfter(20)", () => requeueAfter(20), "requeue_after"],
    [
      "a transient error",
      () => failed(new ServerError("boom", { status: 500, reason: "InternalError" })),
      "error",
    ],
  ] as const)("%s → result %s", async (_name, outcome, result) => {
    const m = await passWith(outcome);
    expect(m.value("controller_runtime_reconcile_total", { controller: "proxy", result })).toBe(1);
    expect(m.value("controller_runtime_reconcile_errors_total", { controller: "proxy" })).toBe(
      result === "error" ? 1 : 0,
    );
    const text = m.render();
    expect(text).toContain('controller_runtime_reconcile_time_seconds_count{controller="proxy"} 1');
    expect(text).toContain('controller_runtime_reconcile_time_seconds_bucket{controller="proxy",le="60"} 1');
    // kubefn's own family keeps counting beside it.
    expect(text).toMatch(/kubefn_passes_total\{controller="proxy",result="\w+"\} 1/);
  });

  it("a probe shard is a job, not a reconcile: kubefn_jobs_total counts it, the pass and controller-runtime's families do not", async () => {
    const kube = new FakeKube();
    const { ctx } = fakeContext(kube);
    const metrics = new PrometheusMetrics();
    const registry = createRegistry([
      proxyController({ resyncSeconds: 300, jobs: { probe: async () => ({ probed: 1 }) } }),
    ]);
    await runJob({ ...ctx, metrics }, registry, {
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: "0", objects: [] },
    });
    expect(metrics.value("kubefn_jobs_total", { controller: "proxy", task: "probe", result: "done" })).toBe(
      1,
    );
    expect(metrics.render()).not.toContain("kubefn_passes_total");
    expect(metrics.render()).not.toContain("controller_runtime_reconcile");
  });
});
