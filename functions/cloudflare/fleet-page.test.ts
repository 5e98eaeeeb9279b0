/**
 * Issue 20: "the fleet page is closed by default where it is public". A Worker's URL is public, so
 * the Worker (wrangler.toml, in workerd through wrangler's test harness) serves `GET /` only behind
 * `API_TOKEN`: without it, 404 saying how to open the page; with it, 401 until it is presented;
 * with `FLEET_PAGE=off`, never. None of these answers reads the cluster (the API server address
 * here is a loopback port nothing listens on).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";

const root = new URL("../../", import.meta.url).pathname;
const apiToken = "fleet-page-token-0123456789";

function worker(vars: Record<string, string>, secrets: Record<string, string>): TestHarness {
  return createTestHarness({
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        vars: { KUBE_SERVER: "http://127.0.0.1:9", ...vars },
        secrets: { KUBE_TOKEN: "kube-token", ...secrets },
      },
    ],
  });
}

let closed: TestHarness;
let behindToken: TestHarness;
let off: TestHarness;

beforeAll(async () => {
  closed = worker({}, {});
  behindToken = worker({}, { API_TOKEN: apiToken });
  off = worker({ FLEET_PAGE: "off" }, { API_TOKEN: apiToken });
  for (const h of [closed, behindToken, off]) await h.listen();
}, 180_000);

afterAll(async () => {
  for (const h of [closed, behindToken, off]) await h?.close();
});

describe("the Worker's fleet page", () => {
  it("without API_TOKEN is not served: 404, saying how to open it", async () => {
    const res = await closed.fetch("/");
    expect(res.status).toBe(404);
    const text = await res.text();
    expect(text).toContain("the fleet page is closed");
    expect(text).toContain("API_TOKEN");
    expect(text).toContain("FLEET_PAGE=open");
  });

  it("with API_TOKEN asks for it (401, a Basic challenge)", async () => {
    const res = await behindToken.fetch("/");
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Basic /);
    await res.text();
  });

  it("with FLEET_PAGE=off is not served even with the token", async () => {
    const res = await off.fetch("/", { headers: { authorization: `Bearer ${apiToken}` } });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("FLEET_PAGE=off");
  });
});
