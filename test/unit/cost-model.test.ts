import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  type FleetCounts,
  lambdaBill,
  monthlyVolumes,
  type Prices,
  podBill,
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
  shardSize: 40,
  confirmationShare: 0,
  passesPerObjectHour: 0,
  sweepsPerHour: 60,
  messagesPerInvocation: 1,
  // 1,000 log bytes + 500 EMF bytes a shard: 3.942 GB of CloudWatch Logs a month.
  shard: { cpuMs: 10, wallMs: 1000, logLines: 2, logBytes: 1000, metricPoints: 120, metricBytes: 500 },
  pass: zero,
  sweepPer1000: zero,
  customMetrics: 1200,
  sqsIdlePollsPerMonth: 0,
};

describe("cost model", () => {
  it("volumes: a second's Proxies packed into shards, a sweep a minute, 730 hours", () => {
    expect(monthlyVolumes(fleet)).toEqual({
      probesPerMonth: 600 * 120 * 730,
      shards: 60 * 60 * 730,
      passes: 0,
      sweeps: 43_800,
      messages: 2_628_000,
    });
    // 41 Proxies a second need two shards, the second holding one.
    expect(monthlyVolumes({ ...fleet, proxies: 41 * 30 }).shards).toBe(2 * 60 * 60 * 730);
  });

  it("Workers: the plan, then only what exceeds each allowance", () => {
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

  it("Lambda with EventBridge Scheduler: delayed shards within the 14 M included", () => {
    const b = lambdaBill(fleet, prices, "scheduler");
    // 0.53436 invocations + 21.90004 GB-s + 0 schedules + 0.0876 events + 360 metrics + 1.971 logs
    expect(b.total).toBeCloseTo(384.493004, 5);
    expect(b.lines.find((l) => l.item.startsWith("EventBridge Scheduler"))!.dollars).toBe(0);
  });

  it("Lambda with SQS: three requests a message", () => {
    const b = lambdaBill(fleet, prices, "sqs");
    expect(b.lines.find((l) => l.item.startsWith("SQS"))!.dollars).toBeCloseTo(3.1536, 6);
    expect(b.total).toBeCloseTo(387.602804, 5);
  });

  it("the pod is the table's range", () => {
    expect(podBill(prices)).toEqual({ low: 10, high: 40 });
  });

  it("the price table is dated and sourced", () => {
    expect(prices.date).toBe("2025");
    expect(prices.source.length).toBeGreaterThan(20);
  });
});
