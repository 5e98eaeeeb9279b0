import { randomBytes } from "node:crypto";
import { request } from "node:http";
import type { Socket } from "node:net";

/**
 * A V8 CPU profile of one isolate over the Chrome DevTools Protocol (workerd's inspector, which
 * wrangler's dev server proxies), and its samples summed by phase.
 */

/** The parts of a `Profiler.Profile` read here. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Starts V8's sampling profiler on the isolate behind `webSocketUrl` (one sample every
 * `intervalUs`); `stop()` ends it and returns the profile.
 *
 * Caveats: sampling costs the isolate CPU of its own (more at a shorter interval): a window
 * profiled is not one to read /proc figures from.
 */
export async function startProfiling(
  webSocketUrl: string,
  intervalUs: number,
): Promise<{ stop(): Promise<CpuProfile> }> {
  const ws = await openWebSocket(webSocketUrl);
  let nextId = 1;
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  ws.onMessage((text) => {
    const m = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string } };
    if (m.id === undefined) return;
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error) w?.reject(new Error(`inspector: ${m.error.message}`));
    else w?.resolve(m.result);
  });
  const call = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, ...(params ? { params } : {}) }));
    });
  await call("Profiler.enable");
  await call("Profiler.setSamplingInterval", { interval: intervalUs });
  await call("Profiler.start");
  return {
    async stop() {
      try {
        const { profile } = (await call("Profiler.stop")) as { profile: CpuProfile };
        await call("Profiler.disable");
        return profile;
      } finally {
        ws.close();
      }
    },
  };
}

/**
 * A WebSocket client of text frames, on `node:http`'s upgrade: wrangler's inspector proxy admits
 * a local `Origin` only, which the platform's `WebSocket` does not let a caller set.
 */
function openWebSocket(
  url: string,
): Promise<{ send(text: string): void; onMessage(f: (text: string) => void): void; close(): void }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        Origin: "http://localhost",
      },
    });
    req.once("response", (res) => reject(new Error(`inspector ${url}: HTTP ${res.statusCode}`)));
    req.once("error", reject);
    req.once("upgrade", (_res, socket: Socket, head: Buffer) => {
      let buffered = head;
      let fragments: Buffer[] = [];
      let listener: (text: string) => void = () => undefined;
      socket.on("data", (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        for (;;) {
          if (buffered.length < 2) return;
          const fin = (buffered[0]! & 0x80) !== 0;
          const opcode = buffered[0]! & 0x0f;
          let length = buffered[1]! & 0x7f;
          let at = 2;
          if (length === 126) {
            if (buffered.length < 4) return;
            length = buffered.readUInt16BE(2);
            at = 4;
          } else if (length === 127) {
            if (buffered.length < 10) return;
            length = Number(buffered.readBigUInt64BE(2));
            at = 10;
          }
          if (buffered.length < at + length) return;
          const payload = buffered.subarray(at, at + length);
          buffered = buffered.subarray(at + length);
          if (opcode === 0x8) {
            socket.end();
            return;
          }
          if (opcode === 0x1 || opcode === 0x0) {
            fragments.push(payload);
            if (fin) {
              const text = Buffer.concat(fragments).toString("utf8");
              fragments = [];
              listener(text);
            }
          }
        }
      });
      const frame = (opcode: number, payload: Buffer) => {
        const mask = randomBytes(4);
        const n = payload.length;
        const header =
          n < 126
            ? Buffer.from([0x80 | opcode, 0x80 | n])
            : n < 65536
              ? Buffer.from([0x80 | opcode, 0x80 | 126, n >> 8, n & 0xff])
              : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), bigLength(n)]);
        const masked = Buffer.from(payload);
        for (let i = 0; i < masked.length; i++) masked[i]! ^= mask[i % 4]!;
        socket.write(Buffer.concat([header, mask, masked]));
      };
      resolve({
        send: (text) => frame(0x1, Buffer.from(text, "utf8")),
        onMessage: (f) => {
          listener = f;
        },
        close: () => {
          frame(0x8, Buffer.alloc(0));
          socket.end();
        },
      });
    });
    req.end();
  });
}

function bigLength(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** A phase and the function names (or V8's own nodes: `(garbage collector)`, …) that are in it. */
export interface PhaseRule {
  phase: string;
  functions: RegExp;
}

/** What the profile says the isolate did: ms per phase, and the functions that took most. */
export interface ProfileBreakdown {
  /** Wall time the profile covers, ms. */
  spanMs: number;
  /** Sampled time not idle (JS, the garbage collector, V8's own `(program)`), ms. */
  busyMs: number;
  /** Samples not idle. */
  busySamples: number;
  /**
   * Busy samples and their ms by phase, most samples first; `other JS` holds what no rule
   * claims. The samples' shares are the figure to read (see the caveats).
   */
  phases: { phase: string; samples: number; ms: number }[];
  /** The functions with the most self time, ms. */
  topSelf: { fn: string; ms: number }[];
}

/**
 * Sums the profile's sample intervals by phase: each sample goes to the first rule, in order,
 * that names a frame of its stack — searched from the innermost frame out, so a rule for a
 * helper (`gunzip`) claims its time inside a broader one (`consume`). `(idle)` samples are not
 * busy; `(program)` (the VM outside JS: the runtime's own native work on the isolate's thread)
 * and `(garbage collector)` are phases of their own; a frame without name or script right under
 * the root (the runtime calling in: I/O callbacks, promise reactions) is named `(native)` for the
 * rules.
 *
 * Caveats: a sample's time is wall time up to the next sample. On a loaded machine the sampler
 * falls behind (a 500 µs interval becomes 5–7 ms) and one sample may stand for a long stall:
 * a `console.log` that waits on the inspector's connection, the thread descheduled. The sum of
 * sample times then exceeds the isolate's CPU time, and a few samples dominate it; the share of
 * samples (each taken while the thread runs) is the steadier figure.
 */
export function profileBreakdown(profile: CpuProfile, rules: readonly PhaseRule[]): ProfileBreakdown {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const phaseOf = new Map<number, string>();
  const classify = (id: number): string => {
    const known = phaseOf.get(id);
    if (known !== undefined) return known;
    const leaf = byId.get(id)!.callFrame.functionName;
    let phase = leaf === "(idle)" ? "(idle)" : "other JS";
    if (phase !== "(idle)")
      outer: for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const f = byId.get(at)!.callFrame;
        // A frame of neither name nor script right under the root: the runtime called in from
        // outside JS (deeper, it is a built-in a JS frame called, which that frame's rule claims).
        const native =
          f.functionName === "" &&
          f.url === "" &&
          byId.get(parent.get(at)!)?.callFrame.functionName === "(root)";
        const name = native ? "(native)" : f.functionName;
        for (const r of rules)
          if (r.functions.test(name)) {
            phase = r.phase;
            break outer;
          }
      }
    phaseOf.set(id, phase);
    return phase;
  };
  const phases = new Map<string, { samples: number; ms: number }>();
  const self = new Map<string, number>();
  let busyMs = 0;
  let busySamples = 0;
  profile.samples.forEach((id, i) => {
    // A sample's time is the interval up to the next one (V8's own convention, as DevTools).
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const phase = classify(id);
    if (phase === "(idle)") return;
    busyMs += ms;
    busySamples++;
    const sum = phases.get(phase) ?? { samples: 0, ms: 0 };
    sum.samples++;
    sum.ms += ms;
    phases.set(phase, sum);
    const f = byId.get(id)!.callFrame;
    const fn = `${f.functionName || "(anonymous)"}${f.url ? `:${f.lineNumber + 1}` : ""}`;
    self.set(fn, (self.get(fn) ?? 0) + ms);
  });
  return {
    spanMs: (profile.endTime - profile.startTime) / 1000,
    busyMs,
    busySamples,
    phases: [...phases].map(([phase, sum]) => ({ phase, ...sum })).sort((a, b) => b.samples - a.samples),
    topSelf: [...self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([fn, ms]) => ({ fn, ms })),
  };
}
