/**
 * Messages a platform queue gzips: a second's probe views of a 10,000-object fleet go as one
 * billed 64 KB chunk, expand to the very message that was signed, and a body that is not kubefn's
 * gzip is left as it came.
 */
import { describe, expect, it } from "vitest";
import { proxyProbeView } from "../../controllers/proxy/health-subject.ts";
import type { KubeObject } from "../../kube/index.ts";
import type { JobMessage, Message } from "../core/index.ts";
import { ENVELOPE_VERSION } from "./envelope.ts";
import { messageBytes } from "./message-fit.ts";
import {
  bodyBytes,
  carriedBodies,
  expandedBody,
  GZIP_MIN_BYTES,
  MAX_EXPANDED_BYTES,
} from "./message-gzip.ts";
import { messageAuthenticatorFrom } from "./message-mac.ts";

const mac = messageAuthenticatorFrom({ statusSealKey: "gzip-test-seal-key-0123456789abcdef" })!;
const BILLED_CHUNK = 64_000;

/** A Proxy as listed in a real fleet: its own namespace, name, address, counters and seal. */
function listedProxy(i: number): KubeObject {
  const at = Date.parse("2026-12-04T10:00:00Z");
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      namespace: `tenant-${i % 37}`,
      name: `proxy-${(i * 7919).toString(36)}-${i}`,
      uid: crypto.randomUUID(),
      resourceVersion: String(100_000 + i * 13),
      generation: 1,
    },
    spec: {
      mode: "External",
      endpoint: {
        host: `10.${i % 200}.${(i * 7) % 250}.${(i * 13) % 250}`,
        port: 3128 + (i % 5),
        scheme: "http",
      },
      healthCheck: { probeURL: `https://target-${i % 11}.example.com/health`, intervalSeconds: 30 },
    },
    status: {
      observedGeneration: 1,
      latencyMillis: 40 + (i % 90),
      lastHealthCheckTime: new Date(at - i * 997).toISOString(),
      health: {
        consecutiveSuccesses: 12 + i,
        consecutiveFailures: 0,
        lastLatencyMillis: 40 + (i % 90),
        seal: `v1.${crypto.randomUUID().replaceAll("-", "")}`,
      },
      conditions: [
        {
          type: "Healthy",
          status: "True",
          reason: "ProbeSucceeded",
          message: "",
          lastTransitionTime: new Date(at - i * 100_000).toISOString(),
        },
      ],
    },
  };
}

const shard = (objects: KubeObject[]): Promise<Message> =>
  mac.sign({
    v: ENVELOPE_VERSION,
    kind: "job",
    job: { controller: "proxy", task: "probe", slot: "7-0", objects, due: 1_796_040_007_000 },
  });

describe("carriedBodies / expandedBody", () => {
  it("a second's 300 probe views (about 230 KB signed) are one body under the 64 KB billed as one operation, and expand to the signed message", async () => {
    const message = await shard(Array.from({ length: 300 }, (_, i) => proxyProbeView(listedProxy(i))));
    expect(messageBytes(message)).toBeGreaterThan(3 * BILLED_CHUNK);
    const bodies = await carriedBodies(message, BILLED_CHUNK);
    expect(bodies).toHaveLength(1);
    expect(bodyBytes(bodies[0]!)).toBeLessThan(BILLED_CHUNK);
    expect(Buffer.byteLength(JSON.stringify(bodies[0]))).toBe(bodyBytes(bodies[0]!));
    // Through a queue: JSON there and back, then expanded — the MAC still holds.
    const expanded = (await expandedBody(JSON.parse(JSON.stringify(bodies[0])))) as Message;
    expect(expanded).toEqual(message);
    expect(await mac.verify(expanded)).toBe(true);
  });

  it("a small message (a pass) travels as it is, and expands to itself", async () => {
    const pass: Message = {
      v: ENVELOPE_VERSION,
      request: { controller: "proxy", namespace: "ns", name: "p" },
      attempt: 0,
      trigger: { kind: "start" },
    } as Message;
    expect(messageBytes(pass)).toBeLessThan(GZIP_MIN_BYTES);
    expect(await carriedBodies(pass, BILLED_CHUNK)).toEqual([pass]);
    expect(await expandedBody(pass)).toBe(pass);
  });

  it("a shard whose gzip is still above the limit is cut by its objects until each piece fits, every object in one, each still signed", async () => {
    // Incompressible: random bytes in every object.
    const noise = () =>
      Array.from(crypto.getRandomValues(new Uint8Array(1_500)), (b) => b.toString(16)).join("");
    const objects = Array.from({ length: 60 }, (_, i) => ({ ...listedProxy(i), spec: { noise: noise() } }));
    const message = (await shard(objects)) as JobMessage;
    const bodies = await carriedBodies(message, BILLED_CHUNK);
    expect(bodies.length).toBeGreaterThanOrEqual(3);
    const pieces: JobMessage[] = [];
    for (const b of bodies) {
      expect(bodyBytes(b)).toBeLessThanOrEqual(BILLED_CHUNK);
      const piece = (await expandedBody(JSON.parse(JSON.stringify(b)))) as JobMessage;
      expect(await mac.verify(piece)).toBe(true);
      pieces.push(piece);
    }
    expect(pieces.flatMap((p) => p.job.objects.map((o) => o.metadata.name))).toEqual(
      objects.map((o) => o.metadata.name),
    );
  });

  it.each([
    ["not base64", { gzip: "%%%" }],
    ["not gzip", { gzip: btoa("plain text") }],
    ["gzip and more fields", { gzip: "H4sI", kind: "job" }],
  ])("a body that does not expand (%s) is left as it came, for the core to drop", async (_, body) => {
    expect(await expandedBody(body)).toBe(body);
  });

  it(`a body expanding beyond ${MAX_EXPANDED_BYTES} bytes (a gzip bomb) is left as it came`, async () => {
    const zeros = new Uint8Array(MAX_EXPANDED_BYTES + 1024);
    const gz = new Uint8Array(
      await new Response(new Blob([zeros]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer(),
    );
    const body = { gzip: Buffer.from(gz).toString("base64") };
    expect(body.gzip.length).toBeLessThan(10_000);
    expect(await expandedBody(body)).toBe(body);
  });
});
