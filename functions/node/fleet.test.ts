import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/index.ts";
import { parseNodeHostEnv } from "./config.ts";
import { startFleet } from "./fleet.ts";

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe("startFleet", () => {
  it("with no cluster yet (discovery only, nothing discovered) answers 503, and stops", async () => {
    const fleet = await startFleet(parseNodeHostEnv({}), [], new PrometheusMetrics(), quiet);
    expect(fleet.clusters).toEqual([]);
    const res = await fleet.fetch(new Request("http://host/v1/events", { method: "POST", body: "{}" }));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "no cluster in the fleet yet" });
    await fleet.remove("east");
    await fleet.stop();
  });

  it("a cluster whose connection fails is not in the fleet, and may be added again", async () => {
    const fleet = await startFleet(parseNodeHostEnv({}), [], new PrometheusMetrics(), quiet);
    let connected = 0;
    const joining = {
      cluster: "east",
      credentials: {},
      connect: async () => {
        connected++;
        throw new Error("unreachable in this test");
      },
    };
    await expect(fleet.add(joining)).rejects.toThrow(/unreachable/);
    await expect(fleet.add(joining)).rejects.toThrow(/unreachable/);
    expect(connected).toBe(2);
    expect(fleet.clusters).toEqual([]);
    await fleet.stop();
  });
});
