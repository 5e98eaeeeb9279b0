import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import { Resources } from "../../shared/kube/index.ts";
import type { Kube, KubeObject, ListPage } from "../../shared/kube/port.ts";
import type { Log, RelayEvent } from "../../shared/runtime/index.ts";
import type { RelayKind } from "./kinds.ts";
import type { RawWatchEvent, WatchStream } from "./watch-stream.ts";
import { isGone, KindWatcher, relayObject } from "./watcher.ts";

const quiet: Log = { info() {}, warn() {}, error() {} };
const configMaps: RelayKind = { resource: Resources.ConfigMap, predicate: "payload" };
const secrets: RelayKind = { resource: Resources.Secret, predicate: "payload" };

const cm = (
  name: string,
  rv: string,
  data: Record<string, string>,
  labels: Record<string, string> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv, labels },
  data,
});

/** A Kube whose list answers from `pages` (one list call per entry, each a list of pages). */
function fakeKube(lists: KubeObject[][][], rvs: string[]): Kube & { listCalls: number } {
  let call = -1;
  let page = 0;
  const kube = {
    listCalls: 0,
    async list(_res: unknown, opts?: { continue?: string }): Promise<ListPage> {
      if (!opts?.continue) {
        call++;
        page = 0;
        kube.listCalls++;
      }
      const pages = lists[call] ?? [[]];
      const items = pages[page] ?? [];
      page++;
      return {
        items,
        resourceVersion: rvs[call] ?? "0",
        ...(page < pages.length ? { continue: `p${page}` } : {}),
      };
    },
  };
  return kube as unknown as Kube & { listCalls: number };
}

/** A WatchStream that plays one script per watch call; records the resourceVersions asked for. */
function scriptedStream(scripts: Array<RawWatchEvent[] | { fail: unknown }>, onExhausted: () => void) {
  const asked: string[] = [];
  const stream: WatchStream = {
    async watch(_res, rv, onEvent, signal) {
      asked.push(rv);
      const script = scripts.shift();
      if (!script) {
        onExhausted();
        if (!signal.aborted)
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return;
      }
      if ("fail" in script) throw script.fail;
      for (const event of script) {
        if (signal.aborted) throw new Error("aborted");
        onEvent(event);
      }
    },
  };
  return { stream, asked };
}

async function runUntilExhausted(
  kind: RelayKind,
  kube: Kube,
  scripts: Array<RawWatchEvent[] | { fail: unknown }>,
  startFrom?: string,
) {
  const emitted: RelayEvent[] = [];
  const metrics = new PrometheusMetrics();
  const stop = new AbortController();
  const { stream, asked } = scriptedStream(scripts, () => stop.abort());
  const watcher = new KindWatcher({
    kind,
    kube,
    stream,
    emit: (e) => emitted.push(e),
    log: quiet,
    metrics,
    sleep: async () => {},
  });
  await watcher.run(stop.signal, startFrom);
  return { emitted, asked, metrics, watcher };
}

const summary = (events: RelayEvent[]) => events.map((e) => `${e.type} ${e.object.metadata.name}`);

describe("KindWatcher", () => {
  it("lists silently, watches from the list's resourceVersion, and forwards only payload edges", async () => {
    const kube = fakeKube([[[cm("a", "5", { k: "1" })], [cm("b", "6", { k: "1" })]]], ["10"]);
    const { emitted, asked, watcher, metrics } = await runUntilExhausted(configMaps, kube, [
      [
        { type: "MODIFIED", object: cm("a", "11", { k: "1" }, { team: "x" }) }, // label only
        { type: "MODIFIED", object: cm("b", "12", { k: "2" }) }, // payload
        { type: "ADDED", object: cm("c", "13", {}) },
        { type: "BOOKMARK", object: { kind: "ConfigMap", metadata: { resourceVersion: "20" } } },
      ],
      [{ type: "DELETED", object: cm("c", "21", {}) }],
    ]);
    expect(summary(emitted)).toEqual(["MODIFIED b", "ADDED c", "DELETED c"]);
    // The second watch resumes from the bookmark's resourceVersion, the third from the last event's.
    expect(asked).toEqual(["10", "20", "21"]);
    expect(watcher.resourceVersion).toBe("21");
    expect(metrics.value("kubefn_relay_filtered_total", { resource: "configmaps" })).toBe(1);
    expect(metrics.value("kubefn_relay_bookmarks_total", { resource: "configmaps" })).toBe(1);
  });

  it("on a 410 ERROR event relists and emits the difference: new, changed, vanished", async () => {
    const kube = fakeKube(
      [
        [
          [
            cm("keep", "1", { k: "1" }),
            cm("change", "2", { k: "1" }),
            cm("relabel", "3", { k: "1" }),
            cm("vanish", "4", { k: "1" }),
          ],
        ],
        [
          [
            cm("keep", "1", { k: "1" }),
            cm("change", "30", { k: "2" }),
            cm("relabel", "31", { k: "1" }, { x: "y" }),
            cm("new", "32", {}),
          ],
        ],
      ],
      ["10", "40"],
    );
    const gone = {
      kind: "Status",
      status: "Failure",
      message: "too old resource version: 10 (35)",
      reason: "Expired",
      code: 410,
    };
    const { emitted, asked, metrics } = await runUntilExhausted(configMaps, kube, [
      [{ type: "ERROR", object: gone }],
    ]);
    expect(kube.listCalls).toBe(2);
    expect(summary(emitted).sort()).toEqual(["ADDED new", "DELETED vanish", "MODIFIED change"]);
    const vanished = emitted.find((e) => e.type === "DELETED")!;
    expect(vanished.object.metadata).toEqual({ name: "vanish", namespace: "ns", uid: "uid-vanish" });
    expect(asked).toEqual(["10", "40"]);
    expect(metrics.value("kubefn_relay_relists_total", { resource: "configmaps" })).toBe(1);
  });

  it("on an HTTP 410 relists; on other failures re-watches from the same resourceVersion", async () => {
    const kube = fakeKube([[[cm("a", "1", {})]], [[cm("a", "1", {})]]], ["10", "50"]);
    const http500 = Object.assign(new Error("Internal Server Error"), { statusCode: 500 });
    const http410 = Object.assign(new Error("Gone"), { statusCode: 410 });
    const { asked, emitted } = await runUntilExhausted(configMaps, kube, [
      { fail: http500 },
      { fail: http410 },
    ]);
    expect(asked).toEqual(["10", "10", "50"]);
    expect(emitted).toEqual([]);
  });

  it("resumed from a resourceVersion without a list, a 410 makes every listed object an ADDED", async () => {
    const kube = fakeKube([[[cm("a", "7", {})]]], ["60"]);
    const { asked, emitted } = await runUntilExhausted(configMaps, kube, [{ fail: { code: 410 } }], "1");
    expect(asked).toEqual(["1", "60"]);
    expect(summary(emitted)).toEqual(["ADDED a"]);
  });

  it("sends Secrets as metadata only, without kubectl's last-applied copy of the data", async () => {
    const secret: KubeObject = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: "s",
        namespace: "ns",
        uid: "u",
        resourceVersion: "2",
        annotations: {
          "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"p":"c2VjcmV0"}}',
          keep: "me",
        },
        managedFields: [{ manager: "kubectl" }],
      },
      type: "Opaque",
      data: { p: "c2VjcmV0" },
    };
    const { emitted } = await runUntilExhausted(secrets, fakeKube([[[]]], ["1"]), [
      [{ type: "ADDED", object: secret }],
    ]);
    expect(emitted).toHaveLength(1);
    expect(emitted[0]!.object).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s", namespace: "ns", uid: "u", resourceVersion: "2", annotations: { keep: "me" } },
    });
    expect(JSON.stringify(emitted)).not.toContain("c2VjcmV0");
  });

  it("relayObject forwards metadata only: no ConfigMap data, no managedFields", () => {
    const object = { ...cm("a", "1", { password: "hunter2" }) };
    object.metadata = { ...object.metadata, managedFields: [{}] };
    const forwarded = relayObject(object, configMaps);
    expect(forwarded).toEqual({
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: cm("a", "1", {}).metadata,
    });
    expect(JSON.stringify(forwarded)).not.toContain("hunter2");
  });
});

describe("isGone", () => {
  it.each([
    [{ statusCode: 410 }, true],
    [{ code: 410, reason: "Expired" }, true],
    [{ reason: "Gone" }, true],
    [new Error("too old resource version: 1 (200)"), true],
    [{ statusCode: 500 }, false],
    [{ code: 403, reason: "Forbidden" }, false],
    [new Error("socket hang up"), false],
    [undefined, false],
  ])("%o → %s", (failure, expected) => {
    expect(isGone(failure)).toBe(expected);
  });
});
