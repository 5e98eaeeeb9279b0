import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { proxyResource, testProxy } from "../../../../test/support/proxies.ts";
import { NetworkError } from "../../../kube/index.ts";
import { sharedProxyListing } from "./listing.ts";

describe("sharedProxyListing", () => {
  function world() {
    const kube = new FakeKube();
    kube.seed(proxyResource, testProxy({ namespace: "a", name: "p1" }));
    kube.seed(proxyResource, testProxy({ namespace: "b", name: "p2" }));
    const { ctx } = fakeContext(kube);
    let t = Date.parse("2026-12-01T00:00:00Z");
    ctx.clock = { now: () => new Date(t) };
    let lists = 0;
    const list = kube.list.bind(kube);
    kube.list = ((...args: Parameters<typeof kube.list>) => {
      lists++;
      return list(...args);
    }) as typeof kube.list;
    return {
      kube,
      listing: sharedProxyListing(ctx, 5),
      lists: () => lists,
      advance: (s: number) => (t += s * 1000),
    };
  }
  const names = (ps: { metadata: { name?: string } }[]) => ps.map((p) => p.metadata.name);

  it("one read serves every scope for the period, concurrent callers included; the next period reads again", async () => {
    const w = world();
    const [all, a, b, none] = await Promise.all([
      w.listing.inScope(undefined, "*"),
      w.listing.inScope(undefined, ["a"]),
      w.listing.inScope("b", ["b"]),
      w.listing.inScope(undefined, ["c"]),
    ]);
    expect([names(all), names(a), names(b), names(none)]).toEqual([["p1", "p2"], ["p1"], ["p2"], []]);
    expect(w.lists()).toBe(1);
    w.advance(6);
    await w.listing.inScope(undefined, "*");
    expect(w.lists()).toBe(2);
  });

  it("a failed read is not kept: the next request reads again", async () => {
    const w = world();
    w.kube.fail("list", new NetworkError("refused", { status: 0, reason: "NetworkError" }));
    await expect(w.listing.inScope(undefined, "*")).rejects.toThrow();
    expect(names(await w.listing.inScope(undefined, "*"))).toEqual(["p1", "p2"]);
  });
});
