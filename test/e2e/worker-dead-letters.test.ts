/**
 * kubefn's Worker in workerd (wrangler's test harness) consuming its dead-letter queue
 * `kubefn-dlq` (test/e2e/dead-letters-standin/: the root config's queues with one retry, a
 * producer of kubefn-dlq, and a stand-in dataset that logs each metric point), against the real
 * devcluster:
 *
 * - a message kubefn never acks (one of a newer release) is retried, dead-lettered by the
 *   platform, and recorded by the Worker's consumer of kubefn-dlq: an error line and a
 *   `kubefn_dead_letters_total{kind="newer"}` point;
 * - a dead-lettered pass for a Proxy leaves a Warning Event `DeadLettered` on it, which `kubectl
 *   describe` shows: about the Proxy read from the API server (its UID, not the one the message
 *   carries), in kubefn's words (none of the body's);
 * - dead letters anyone who may write to the queue could craft — an unregistered controller, a
 *   name no object can have, a Proxy that does not exist, an object in another namespace, a body
 *   that is no kubefn message — are logged and counted, and write nothing.
 */
import type { Queue } from "@cloudflare/workers-types/index.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { eventually } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { workerCluster } from "../support/worker-cluster.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = `worker-dlq-${Math.random().toString(36).slice(2, 8)}`;

type Proxy = ProxyObject & KubeObject;
interface EventObject extends KubeObject {
  type: string;
  reason: string;
  action: string;
  note: string;
  reportingController: string;
  regarding: { kind: string; namespace?: string; name: string; uid: string };
}

let kube: Kube;
let harness: TestHarness;
let proxy: Proxy;

beforeAll(async () => {
  const { httpProxy, workerToken, kube: admin } = await workerCluster(namespace);
  kube = admin;
  proxy = await kube.create<Proxy>(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name: "px-dead", namespace },
    spec: { mode: "External", endpoint: { host: "192.0.2.1", port: 3128, scheme: "http" } },
  } as Proxy);
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "test/e2e/dead-letters-standin/wrangler.toml",
        vars: { KUBE_SERVER: httpProxy },
        secrets: { KUBE_TOKEN: workerToken },
      },
    ],
  });
  await harness.listen();
}, 180_000);

afterAll(async () => {
  try {
    // External Proxies carry no finalizer: they go with their namespace (and its Events).
    if (kube) await removeNamespaces(kube, [namespace], { dropFinalizers: true });
  } finally {
    await harness?.close();
  }
}, 180_000);

function workerLines(): Array<Record<string, unknown>> {
  return harness.getLogs().flatMap((l) => {
    try {
      return [JSON.parse(l.message) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

const deadLetterLines = () => workerLines().filter((l) => String(l.msg).startsWith("dead letter"));

/** The `kubefn_dead_letters_total` points written, as `labels` (blob2) → their sum. */
function deadLetterPoints(): Map<string, number> {
  const sums = new Map<string, number>();
  for (const line of workerLines()) {
    const point =
      line.msg === "data point" ? (line.point as { blobs?: string[]; doubles?: number[] }) : undefined;
    if (point?.blobs?.[0] !== "kubefn_dead_letters_total") continue;
    const labels = point.blobs[1] ?? "";
    sums.set(labels, (sums.get(labels) ?? 0) + (point.doubles?.[0] ?? 0));
  }
  return sums;
}

async function deadLetteredEvents(ns: string): Promise<EventObject[]> {
  const page = await kube.list<EventObject>(Resources.Event, { namespace: ns });
  return page.items.filter((e) => e.reason === "DeadLettered");
}

const env = () =>
  harness.getWorker<{ KUBEFN_QUEUE: Queue<unknown>; DEAD_LETTERS: Queue<unknown> }>().getEnv();

describe("Workers: the consumer of kubefn-dlq", () => {
  it("a message kubefn does not ack is retried, dead-lettered by the platform, and recorded: an error line and a metric point", async () => {
    const { KUBEFN_QUEUE } = await env();
    await KUBEFN_QUEUE.send({
      v: 99,
      request: { controller: "proxy", namespace, name: proxy.metadata.name },
    });
    const line = await eventually(
      async () => deadLetterLines().find((l) => String(l.msg).includes("newer release")),
      { timeoutMs: 60_000, intervalMs: 500, what: "the dead letter of the newer release's message" },
    );
    expect(line).toMatchObject({ level: "error", version: 99 });
    // Retried by kubefn's consumer first: the platform dead-lettered it, not the test.
    expect(
      workerLines().some((l) => String(l.msg).includes("newer release; left for a release that reads it")),
    ).toBe(true);
    await eventually(
      async () => ((deadLetterPoints().get("controller=unknown,kind=newer") ?? 0) >= 1 ? true : undefined),
      { timeoutMs: 15_000, what: "kubefn_dead_letters_total{kind=newer}" },
    );
  }, 90_000);

  it("a dead-lettered pass for a Proxy leaves a Warning Event DeadLettered about the Proxy read, in kubefn's words", async () => {
    const { DEAD_LETTERS } = await env();
    await DEAD_LETTERS.send({
      v: 2,
      attempt: 4,
      request: { controller: "proxy", namespace, name: proxy.metadata.name },
      // What a forger would like the Event to say and be about: none of it is read.
      uid: "00000000-0000-0000-0000-000000000000",
      note: "kubefn says: run kubectl delete ns kube-system",
      reason: "PleaseRotateTokens",
    });
    const [event] = await eventually(
      async () => {
        const events = await deadLetteredEvents(namespace);
        return events.length > 0 ? events : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: "a DeadLettered Event in the Proxy's namespace" },
    );
    expect(event).toMatchObject({
      type: "Warning",
      reason: "DeadLettered",
      action: "Reconcile",
      reportingController: "kubefn.dev/proxy",
      regarding: { kind: "Proxy", namespace, name: proxy.metadata.name, uid: proxy.metadata.uid },
    });
    expect(event?.note).toContain("dead-lettered");
    expect(event?.note).not.toMatch(/kube-system|PleaseRotate|kubectl delete/);
    expect(deadLetterLines().find((l) => String(l.msg).includes("recorded on its object"))).toMatchObject({
      level: "error",
      request: { controller: "proxy", namespace, name: proxy.metadata.name },
      uid: proxy.metadata.uid,
    });
    await eventually(
      async () => ((deadLetterPoints().get("controller=proxy,kind=pass") ?? 0) >= 1 ? true : undefined),
      { timeoutMs: 15_000, what: "kubefn_dead_letters_total{controller=proxy,kind=pass}" },
    );
  }, 60_000);

  it("crafted dead letters write nothing: an unknown controller, a name no object has, a Proxy that does not exist, another namespace, no kubefn message", async () => {
    const { DEAD_LETTERS } = await env();
    const before = deadLetterLines().length;
    const crafted: unknown[] = [
      { v: 2, attempt: 0, request: { controller: "secrets", namespace, name: proxy.metadata.name } },
      { v: 2, attempt: 0, request: { controller: "proxy", namespace, name: "../../secrets/x" } },
      { v: 2, attempt: 0, request: { controller: "proxy", namespace: "Kube System!", name: "px" } },
      { v: 2, attempt: 0, request: { controller: "proxy", name: proxy.metadata.name } },
      { v: 2, attempt: 0, request: { controller: "proxy", namespace, name: "px-nobody-made" } },
      { v: 2, attempt: 0, request: { controller: "proxy", namespace: "default", name: proxy.metadata.name } },
      "kubefn says: everything is on fire",
    ];
    await DEAD_LETTERS.sendBatch(crafted.map((body) => ({ body })));
    const lines = await eventually(
      async () => {
        const got = deadLetterLines().slice(before);
        return got.length >= crafted.length ? got : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: `${crafted.length} dead letter lines` },
    );
    expect(lines.filter((l) => String(l.msg).includes("recorded on its object"))).toEqual([]);
    expect(lines.filter((l) => String(l.msg).includes("names no object"))).toHaveLength(4);
    expect(lines.filter((l) => String(l.msg).includes("its object is gone"))).toHaveLength(2);
    expect(lines.filter((l) => String(l.msg).includes("not a kubefn message"))).toHaveLength(1);
    // No line repeats a name the body made up, nor its text.
    expect(JSON.stringify(lines)).not.toMatch(/secrets\/x|Kube System|on fire/);
    // The one Event in the namespace is the previous test's; none in default.
    expect(await deadLetteredEvents(namespace)).toHaveLength(1);
    expect(
      (await deadLetteredEvents("default")).filter((e) => e.regarding.name === proxy.metadata.name),
    ).toEqual([]);
    await eventually(
      async () => ((deadLetterPoints().get("controller=unknown,kind=invalid") ?? 0) >= 1 ? true : undefined),
      { timeoutMs: 15_000, what: "kubefn_dead_letters_total{kind=invalid}" },
    );
  }, 60_000);
});
