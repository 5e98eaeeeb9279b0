import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  type FleetCounts,
  lambdaBill,
  lambdaDurationMs,
  monthlyVolumes,
  type Prices,
  podBill,
  stateChangesBill,
  type UnitCost,
  workersBill,
} from "../bench/cost-model.ts";

const prices = JSON.parse(
  readFileSync(new URL("../bench/prices-2025.json", import.meta.url), "utf8"),
) as Prices;
const zero: UnitCost = { cpuMs: 0, wallMs: 0, logLines: 0, logBytes: 0, metricPoints: 0, metricBytes: 0 };

/** 600 Proxies every 30 s (20 a second: one shard a second), nothing but probe shards and sweeps. */
const fleet: FleetCounts = {
  objects: 1000,
  proxies: 600,
  probeIntervalSeconds: 30,
  confirmationShare: 0,
  passesPerObjectHour: 0,
  sweepsPerHour: 60,
  // One second's 20 Proxies in one shard of 10 KB; 1,000 log bytes + 500 EMF bytes an invocation:
  // 3.942 GB of CloudWatch Logs a month.
  second: {
    proxies: 20,
    shards: 1,
    shardBytes: [10_000],
    invocation: { cpuMs: 10, wallMs: 1000, logLines: 2, logBytes: 1000, metricPoints: 120, metricBytes: 500 },
  },
  passesPerInvocation: 10,
  pass: zero,
  sweepPer1000: zero,
  customMetrics: 1200,
  sqsIdlePollsPerMonth: 0,
  lambdaMemoryMb: 512,
};
const SECONDS = 730 * 3600;

describe("cost model", () => {
  it("volumes: one invocation per second of probing, its shards billed per 64 KB, a sweep a minute", () => {
    expect(monthlyVolumes(fleet)).toEqual({
      probesPerMonth: 600 * 120 * 730,
      probeInvocations: SECONDS,
      shards: SECONDS,
      shardChunks: SECONDS,
      // Shards of 10 KB, ten to a SendMessageBatch: 100 KB a call, two requests per ten shards.
      shardSendRequests: (SECONDS / 10) * 2,
      passes: 0,
      sweeps: 43_800,
      messages: SECONDS,
      messageChunks: SECONDS,
    });
    // Twice the Proxies of the measured second: twice the invocations and shards.
    expect(monthlyVolumes({ ...fleet, proxies: 1200 }).shards).toBe(2 * SECONDS);
    // A shard of 100 KB is two 64 KB chunks.
    const big = { ...fleet, second: { ...fleet.second, shardBytes: [100_000] } };
    expect(monthlyVolumes(big).shardChunks).toBe(2 * SECONDS);
    // Each shard is billed by its own chunks: shards of 65.8 KB and 33 KB are three chunks a
    // second, not the two their mean (49.4 KB, one chunk each) would make.
    const uneven = { ...fleet, second: { ...fleet.second, shards: 2, shardBytes: [65_800, 33_000] } };
    expect(monthlyVolumes(uneven).shardChunks).toBe(3 * SECONDS);
    // Sent ten to a call and billed per 64 KB of the call: ten 19.4 KB shards are three requests;
    // shards of 100 KB go two to a call (240 KB), each call four requests.
    const second = { ...fleet, second: { ...fleet.second, shardBytes: [19_400] } };
    expect(monthlyVolumes(second).shardSendRequests).toBeCloseTo((SECONDS / 10) * 3, 6);
    expect(monthlyVolumes(big).shardSendRequests).toBeCloseTo((SECONDS / 2) * 4, 6);
  });

  it("Workers: the plan, then only what exceeds each allowance; Queues per 64 KB", () => {
    const b = workersBill(fleet, prices);
    const by = Object.fromEntries(b.lines.map((l) => [l.item.split(" (")[0], l.dollars]));
    // 2.67 M requests and 26.3 M CPU ms are within 10 M and 30 M: nothing beyond the plan.
    expect(by.requests).toBe(0);
    expect(by["CPU time"]).toBe(0);
    // 7,884,000 operations, 1 M included: 6.884 M × $0.40.
    expect(by["Queues operations"]).toBeCloseTo(2.7536, 6);
    // 315.36 M data points, 10 M included: 305.36 M × $0.25.
    expect(by["Analytics Engine data points"]).toBeCloseTo(76.34, 6);
    expect(by["Workers Paid plan"]).toBe(5);
    expect(by["Workers Logs events"]).toBe(0);
    expect(b.total).toBeCloseTo(84.0936, 6);
    // Shards of 100 KB: two operations each for write, read and delete.
    const big = workersBill({ ...fleet, second: { ...fleet.second, shardBytes: [100_000] } }, prices);
    expect(big.lines.find((l) => l.item.startsWith("Queues"))!.dollars).toBeCloseTo(
      (6 * SECONDS - 1e6) * 0.4e-6,
      6,
    );
  });

  it("Workers below every allowance costs the plan alone", () => {
    // No probes; 73,000 passes (219,000 queue operations) and the sweeps.
    const small = {
      ...fleet,
      proxies: 0,
      passesPerObjectHour: 0.1,
      pass: { ...zero, cpuMs: 5, logLines: 1 },
    };
    expect(workersBill(small, prices).total).toBe(5);
  });

  it("Lambda's billed duration: the wall time, or the CPU time at the memory size's share of a vCPU", () => {
    expect(lambdaDurationMs(1000, 10, 512)).toBe(1000);
    expect(lambdaDurationMs(100, 100, 256)).toBeCloseTo((100 * 1769) / 256, 9);
    expect(lambdaDurationMs(100, 100, 3008)).toBe(100);
  });

  it("Lambda with EventBridge Scheduler: delayed shards within the 14 M included", () => {
    const b = lambdaBill(fleet, prices, "scheduler");
    const gbSeconds = SECONDS * 1 * 0.5;
    expect(b.lines.find((l) => l.item.startsWith("duration at 512 MB, arm64"))!.dollars).toBeCloseTo(
      gbSeconds * 0.0000133334,
      6,
    );
    expect(b.lines.find((l) => l.item.startsWith("EventBridge Scheduler"))!.dollars).toBe(0);
  });

  it("Lambda with SQS: shards sent ten to a call billed per 64 KB, a receive and a delete per batch", () => {
    const b = lambdaBill(fleet, prices, "sqs");
    // 0.526 M sends (10 KB shards ten to a call: two requests) + 2.628 M receives + 2.628 M deletes.
    expect(b.lines.find((l) => l.item.startsWith("SQS"))!.dollars).toBeCloseTo(2.31264, 6);
    expect(b.lines.find((l) => l.item.startsWith("CloudWatch custom"))!.dollars).toBeCloseTo(360, 6);
  });

  it("regression: SQS bills a receive per 64 KB of what it returns, as a send (a second of 164 KB was counted as one receive)", () => {
    const big = { ...fleet, second: { ...fleet.second, shardBytes: [164_000] } };
    const b = lambdaBill(big, prices, "sqs");
    // 3 sends + 3 receives + 1 delete a second.
    expect(b.lines.find((l) => l.item.startsWith("SQS"))!.quantity).toBeCloseTo(7 * SECONDS, 0);
  });

  it("the pod is the table's range", () => {
    expect(podBill(prices)).toEqual({ low: 10, high: 40 });
  });

  it("the price table is dated and sourced", () => {
    expect(prices.date).toBe("2025");
    expect(prices.source.length).toBeGreaterThan(20);
  });

  it("state changes: nothing at steady state; an incident (Unhealthy, then Ready) is two events, billed per event on EventBridge and per operation on Queues", () => {
    const steady = stateChangesBill(
      { perSteadyPass: 0, passesPerMonth: 1e6, flippingProxies: 0, flipsPerProxyMonth: 30 },
      prices,
    );
    expect(steady).toEqual({ events: 0, eventBridge: 0, queues: 0 });
    const b = stateChangesBill(
      { perSteadyPass: 0, passesPerMonth: 1e6, flippingProxies: 9000, flipsPerProxyMonth: 30 },
      prices,
    );
    expect(b.events).toBe(540_000);
    expect(b.eventBridge).toBeCloseTo(0.54, 6);
    expect(b.queues).toBeCloseTo(0.648, 6);
  });
});
