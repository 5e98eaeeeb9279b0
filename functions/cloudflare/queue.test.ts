import type { MessageSendRequest, QueueSendBatchOptions } from "@cloudflare/workers-types/index.ts";
import { describe, expect, it } from "vitest";
import { expandedBody, type JobMessage, type Message, type PassMessage } from "../../shared/runtime/index.ts";
import {
  clampDelay,
  MAX_BATCH_MESSAGES,
  MAX_DELAY_SECONDS,
  MAX_MESSAGE_BYTES,
  MAX_SHARD_BYTES,
  queuesPort,
  settle,
} from "./queue.ts";

/** A listed Proxy of about 3.2 KB: its `kubectl apply` annotation holds a copy of the object. */
const appliedProxy = (i: number) => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: {
    namespace: "crawl",
    name: `p${i}`,
    annotations: { "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(3_200) },
  },
  spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128 } },
});

const message = (name: string, listedBytes = 0): PassMessage => ({
  request: { controller: "proxy", namespace: "ns", name },
  attempt: 0,
  ...(listedBytes
    ? {
        listed: [
          {
            apiVersion: "v1",
            kind: "X",
            metadata: { name, annotations: { pad: "x".repeat(listedBytes) } },
          },
        ],
      }
    : {}),
});

function recordingBinding() {
  const calls: Array<{ bodies: Message[]; options: QueueSendBatchOptions | undefined }> = [];
  return {
    calls,
    async sendBatch(messages: Iterable<MessageSendRequest<Message>>, options?: QueueSendBatchOptions) {
      calls.push({ bodies: [...messages].map((m) => m.body), options });
      return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
    },
  };
}

describe("clampDelay", () => {
  it.each([
    [undefined, 0],
    [0, 0],
    [-3, 0],
    [Number.NaN, 0],
    [0.2, 1],
    [30, 30],
    [86_400, MAX_DELAY_SECONDS],
  ])("%s → %s", (input, expected) => expect(clampDelay(input)).toBe(expected));
});

describe("queuesPort", () => {
  it("sends at once without options and delayed with delaySeconds", async () => {
    const binding = recordingBinding();
    const queue = queuesPort(binding);
    await queue.send([message("a")]);
    await queue.send([message("b")], 90.5);
    expect(binding.calls).toEqual([
      { bodies: [message("a")], options: undefined },
      { bodies: [message("b")], options: { delaySeconds: 91 } },
    ]);
  });

  it("splits into batches of at most 100 messages, in order", async () => {
    const binding = recordingBinding();
    const all = Array.from({ length: 250 }, (_, i) => message(`p${i}`));
    await queuesPort(binding).send(all);
    expect(binding.calls.map((c) => c.bodies.length)).toEqual([MAX_BATCH_MESSAGES, MAX_BATCH_MESSAGES, 50]);
    expect(binding.calls.flatMap((c) => c.bodies)).toEqual(all);
  });

  it("splits by size so a batch of listed objects stays under the platform's 256 KB", async () => {
    const binding = recordingBinding();
    await queuesPort(binding).send(Array.from({ length: 100 }, (_, i) => message(`p${i}`, 5_000)));
    expect(binding.calls.length).toBeGreaterThan(1);
    for (const call of binding.calls) expect(JSON.stringify(call.bodies).length).toBeLessThan(256_000);
  });

  it("drops the listed objects of a message too large to send, keeping the request", async () => {
    const binding = recordingBinding();
    await queuesPort(binding).send([message("big", 200_000)]);
    expect(binding.calls[0]?.bodies).toEqual([message("big")]);
  });

  it("regression: a shard of 40 Proxies of 3.2 KB fits the 128 KB message limit (sendBatch failed)", async () => {
    const binding = recordingBinding();
    const objects = Array.from({ length: 40 }, (_, i) => appliedProxy(i));
    const shard: JobMessage = {
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: "7-0", objects, due: 1 },
    };
    expect(JSON.stringify(shard).length).toBeGreaterThan(128 * 1024);
    const queue = queuesPort(binding);
    expect(queue.maxMessageBytes).toBe(MAX_SHARD_BYTES);
    await queue.send([shard], 7);
    const bodies = binding.calls.flatMap((c) => c.bodies);
    for (const body of bodies)
      expect(Buffer.byteLength(JSON.stringify(body))).toBeLessThan(MAX_MESSAGE_BYTES);
    const jobs = (await Promise.all(bodies.map(expandedBody))) as JobMessage[];
    expect(jobs.flatMap((b) => b.job.objects.map((o) => o.metadata.name))).toEqual(
      objects.map((o) => o.metadata.name),
    );
    expect(jobs.every((b) => b.kind === "job" && b.job.due === 1)).toBe(true);
  });

  it("a second's 300 probe views (one job) go as one gzipped message under the 64 KB Queues bill as one operation, not three of 64 KB", async () => {
    const binding = recordingBinding();
    const view = (i: number) => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: "crawl", name: `p${i}`, resourceVersion: String(1000 + i) },
      spec: {
        mode: "External",
        endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" },
        healthCheck: { probeURL: "http://198.51.100.9/healthz", successThreshold: 1 },
      },
      status: {
        health: JSON.stringify({ instance: "203.0.113.7:3128", verdict: true, consecOK: 9 }).padEnd(200),
      },
    });
    const objects = Array.from({ length: 300 }, (_, i) => view(i));
    const second: JobMessage = {
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: "3-0", objects, due: 1 },
    };
    await queuesPort(binding).send([second], 3);
    const bodies = binding.calls.flatMap((c) => c.bodies);
    // 300 views of ~510 bytes (153 KB, three 64 KB messages as they are): one, gzipped.
    expect(JSON.stringify(second).length).toBeGreaterThan(2 * MAX_MESSAGE_BYTES);
    expect(bodies).toHaveLength(1);
    expect(Buffer.byteLength(JSON.stringify(bodies[0]))).toBeLessThan(MAX_MESSAGE_BYTES);
    expect(await expandedBody(bodies[0])).toEqual(second);
  });

  it("keeps the UID when it drops the listed objects", async () => {
    const binding = recordingBinding();
    await queuesPort(binding).send([{ ...message("big", 200_000), uid: "uid-1", listedAt: 5 }]);
    expect(binding.calls[0]?.bodies).toEqual([{ ...message("big"), uid: "uid-1" }]);
  });
});

describe("settle", () => {
  function delivered() {
    const m = {
      acked: false,
      retried: undefined as { delaySeconds?: number } | undefined,
      ack() {
        m.acked = true;
      },
      retry(options?: { delaySeconds?: number }) {
        m.retried = options ?? {};
      },
    };
    return m;
  }

  it("acks what was acked and retries the rest after their delay, clamped to what Queues accept", () => {
    const msgs = [delivered(), delivered(), delivered()];
    settle(msgs, [
      { ack: true },
      { ack: false, retryAfterSeconds: 12 },
      { ack: false, retryAfterSeconds: MAX_DELAY_SECONDS * 2 },
    ]);
    expect(msgs.map((m) => [m.acked, m.retried])).toEqual([
      [true, undefined],
      [false, { delaySeconds: 12 }],
      [false, { delaySeconds: MAX_DELAY_SECONDS }],
    ]);
  });
});
