/**
 * `npm run bench -- host-memory`: what the Node host holds, and spends, per External Proxy — the
 * slope the large profile's 9,000 Proxies would take half an hour of the whole machine to show.
 *
 * One audited devcluster (writes forwarded to the host's intake, as the fleet bench does), the
 * probe fixtures in a process of their own, and the fleet grown in steps
 * (`KUBEFN_BENCH_HOST_MEMORY_STEPS`, default `0,1000,3000` Proxies, `intervalSeconds: 30`). At each
 * step the Proxies are created and converged (Ready), then the host is restarted, so that every
 * step measures a host with no history but that fleet (its first sweep, a full one, sends every
 * object a pass; the window starts after its second sweep). Over a 60 s window (one sweep period,
 * two probes of every Proxy): RSS sampled each second (max and mean), the V8 heap in use at its
 * end, CPU (user and kernel, from /proc) and the probes counted at the target, and the machine's
 * load average. Then a heap snapshot of the host (`--heapsnapshot-signal`), summed by constructor:
 * the largest kinds of object, and those that grew most since the first step.
 *
 * `KUBEFN_BENCH_HOST_MEMORY_NODE_OPTIONS` measures each step once per variant of the host's Node
 * options — or of the image's process (`image`: main.ts bundled as infra/host/Containerfile builds
 * it, run with its ENTRYPOINT's options) — side by side in one run; `KUBEFN_BENCH_HOST_MEMORY_PROFILE=<dir>` writes each host's V8
 * CPU profile there. The rows end with each variant's slopes between its first and last step: MiB
 * of RSS and of live heap per 1,000 Proxies, and the CPU of one more probe (the window's CPU above
 * the first step's, over the probes above its), which the fixed work of a sweep does not blur.
 *
 * Caveats: a step's heap snapshot is taken after its window, so its own memory never counts in
 * a figure (the next step's host is a new process). CPU per probe on a loaded machine is higher:
 * the load average is printed beside it.
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, isAlreadyExists, listAll, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { type HostCommand, type HostProcess, imageCommand, startHost, startShCommand } from "../e2e/host.ts";
import { tempDir } from "../support/temp-dir.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import { AuditTee, benchAuditPolicy, saKubeconfig, startAuditedDevcluster } from "./fleet.ts";
import { startFixtures } from "./sweep.ts";

const NAMESPACE = "bench-host-memory";
const WINDOW_MS = 60_000;

/** One step's figures. */
export interface HostMemoryStep {
  proxies: number;
  /** The variant measured ("" for `scripts/start.sh`'s host alone; {@link hostMemoryVariantsFromEnv}). */
  nodeOptions: string;
  rssMaxMiB: number;
  rssMeanMiB: number;
  heapUsedMiB: number;
  /** V8's heap as committed (`heapTotal`) at the window's end, MiB. */
  heapTotalMiB: number;
  /** Resident at the window's end by mapping: malloc's `[heap]`, other anonymous (V8's pages, malloc's mmaps), the node binary. */
  residentMiB: { malloc: number; anonymous: number; binary: number };
  /** Live heap in the snapshot (after the full GC it makes), MiB. */
  snapshotMiB: number;
  cpuMsPerMinute: number;
  systemMsPerMinute: number;
  probesPerMinute: number;
  loadAverage: [number, number, number];
  /** The snapshot's self size by kind of object (`type:constructor`), MiB, largest first. */
  byConstructor: Record<string, number>;
}

/**
 * `KUBEFN_BENCH_HOST_MEMORY_NODE_OPTIONS="|--max-old-space-size=4096|image|image --no-enable-source-maps"`:
 * the hosts to measure, `|`-separated; each step is measured once with each, on a host of its own,
 * in that order (one run compares them on the same fleet). A variant is extra Node options placed
 * after `scripts/start.sh`'s (which they override), or `image` and extra options placed after
 * {@link IMAGE_NODE_ARGS}: the process infra/host/Containerfile runs. Default: one measurement of
 * `scripts/start.sh`'s host.
 */
export function hostMemoryVariantsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.KUBEFN_BENCH_HOST_MEMORY_NODE_OPTIONS ?? "").split("|").map((v) => v.trim());
}

/**
 * The image's variant's options after its ENTRYPOINT's: the old generation a Pod limited to 1 GiB
 * (infra/host/deployment.yaml) gives V8, which Node sizes from the container's limit, not set here.
 */
export const IMAGE_NODE_ARGS = ["--max-old-space-size=512"];

/** A variant parsed (pure): the image's process or `scripts/start.sh`'s, and the Node options after its own. */
export function parseHostMemoryVariant(variant: string): { image: boolean; nodeArgs: string[] } {
  const words = variant.split(" ").filter((o) => o !== "");
  const image = words[0] === "image";
  return { image, nodeArgs: image ? [...IMAGE_NODE_ARGS, ...words.slice(1)] : words };
}

/** `KUBEFN_BENCH_HOST_MEMORY_STEPS=0,1000,3000`: the fleet sizes, ascending. */
export function hostMemoryStepsFromEnv(env: NodeJS.ProcessEnv = process.env): number[] {
  const raw = env.KUBEFN_BENCH_HOST_MEMORY_STEPS ?? "0,1000,3000";
  const steps = raw.split(",").map((s) => Number(s.trim()));
  if (steps.some((n) => !Number.isInteger(n) || n < 0) || steps.some((n, i) => i > 0 && n <= steps[i - 1]!))
    throw new Error(`KUBEFN_BENCH_HOST_MEMORY_STEPS must be ascending whole numbers, got ${raw}`);
  return steps;
}

/**
 * A V8 heap snapshot's self sizes summed by kind (pure): objects, closures and arrays by their
 * constructor's name, every string as `(strings)`, compiled code as `(code)`.
 *
 * @example
 * summariseHeapSnapshot(JSON.parse(readFileSync(file, "utf8"))) // → { "object:Object": 12.3, "(strings)": 8.1, … } (MiB)
 */
export function summariseHeapSnapshot(snapshot: {
  snapshot: { meta: { node_fields: string[]; node_types: unknown[] } };
  nodes: number[];
  strings: string[];
}): Record<string, number> {
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0] as string[];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const bytes = new Map<string, number>();
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]!] ?? "?";
    const name = snapshot.strings[snapshot.nodes[i + nameAt]!] ?? "";
    const kind =
      type === "string" || type === "concatenated string" || type === "sliced string"
        ? "(strings)"
        : type === "code"
          ? "(code)"
          : type === "object shape"
            ? "(shapes)"
            : type === "number"
              ? "(numbers)"
              : `${type}:${name.length > 40 ? `${name.slice(0, 40)}…` : name}`;
    bytes.set(kind, (bytes.get(kind) ?? 0) + snapshot.nodes[i + sizeAt]!);
  }
  return Object.fromEntries(
    [...bytes.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, round(n / 2 ** 20, 2)]),
  );
}

interface ProcUsage {
  userMs: number;
  systemMs: number;
  rssMiB: number;
}

function procUsage(pid: number): ProcUsage {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return {
    userMs: Number(f[11]) * 10,
    systemMs: Number(f[12]) * 10,
    rssMiB: (Number(f[21]) * 4096) / 2 ** 20,
  };
}

/** Resident KiB of a process by mapping kind, from /proc/<pid>/smaps, in MiB. */
function residentOf(pid: number): HostMemoryStep["residentMiB"] {
  const out = { malloc: 0, anonymous: 0, binary: 0 };
  let kind: keyof typeof out | undefined;
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const name = mapping[1] ?? "";
      kind =
        name === "[heap]"
          ? "malloc"
          : name === ""
            ? "anonymous"
            : name.endsWith("/node")
              ? "binary"
              : undefined;
      continue;
    }
    if (kind && line.startsWith("Rss:")) out[kind] += Number(line.split(/\s+/)[1]) / 1024;
  }
  return { malloc: round(out.malloc, 1), anonymous: round(out.anonymous, 1), binary: round(out.binary, 1) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function gauge(host: HostProcess, name: string): Promise<number> {
  const text = await (await fetch(`${host.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return Number(line?.split(" ").at(-1) ?? Number.NaN);
}

/** Waits until the host has logged `n` sweeps from now. */
async function sweeps(host: HostProcess, n: number, timeoutMs: number): Promise<void> {
  const from = host.lines.length;
  const deadline = Date.now() + timeoutMs;
  while (host.lines.slice(from).filter((l) => l.msg === "sweep").length < n) {
    if (Date.now() > deadline) throw new Error(`the host logged fewer than ${n} sweeps in ${timeoutMs} ms`);
    await sleep(1000);
  }
}

/** Writes a heap snapshot of the host and sums it by constructor; removes the file. */
async function snapshotOf(host: HostProcess, dir: string): Promise<Record<string, number>> {
  const before = new Set(readdirSync(dir));
  host.child.kill("SIGUSR2");
  let file: string | undefined;
  for (let i = 0; i < 600 && !file; i++) {
    await sleep(500);
    file = readdirSync(dir).find((f) => f.endsWith(".heapsnapshot") && !before.has(f));
  }
  if (!file) throw new Error("the host wrote no heap snapshot in 300 s");
  const path = join(dir, file);
  // Written synchronously by the host's main thread: complete once the host answers again.
  for (let last = -1; ; ) {
    await sleep(1000);
    const size = statSync(path).size;
    const answers = await fetch(`${host.url}/metrics`).then(
      (r) => r.ok,
      () => false,
    );
    if (answers && size === last) break;
    last = size;
  }
  try {
    return summariseHeapSnapshot(JSON.parse(readFileSync(path, "utf8")));
  } finally {
    rmSync(path, { force: true });
  }
}

export async function benchHostMemory(
  steps: number[] = hostMemoryStepsFromEnv(),
  variants: string[] = hostMemoryVariantsFromEnv(),
): Promise<{ rows: BenchRow[]; json: Record<string, unknown> }> {
  const temp = tempDir("kubefn-bench-host-memory-");
  const cleanups: (() => Promise<unknown>)[] = [async () => temp.remove()];
  let host: HostProcess | undefined;
  // The host, killed if the bench exits without its cleanups (SIGINT/SIGTERM: run.ts exits at
  // once); the devcluster exits with its parent, the fixtures when their stdin closes.
  const killHost = () => {
    if (host && host.child.exitCode === null && host.child.signalCode === null) host.child.kill("SIGKILL");
  };
  process.once("exit", killHost);
  try {
    const tee = new AuditTee();
    const webhook = await tee.start();
    cleanups.unshift(() => tee.stop());
    const cluster = await startAuditedDevcluster(webhook, tee.token, benchAuditPolicy(temp.path));
    cleanups.unshift(() => cluster.stop());
    const adminTransport = createNodeTransport(loadKubeConfig({ file: cluster.kubeconfig }));
    const admin = createKube(adminTransport, { fieldManager: "kubefn-bench" });
    await installCrdsAndRbac(admin);
    const kubeconfig = saKubeconfig(
      cluster.kubeconfig,
      await serviceAccountToken(adminTransport, "kubefn-system", "kubefn"),
      temp.path,
      "kubefn",
    );
    const fixtures = await startFixtures(4);
    cleanups.push(() => fixtures.stop());
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: NAMESPACE },
    });
    await admin.create(Resources.RoleBinding, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "kubefn-tenant", namespace: NAMESPACE },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "kubefn-tenant" },
      subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
    });
    const intakeToken = randomBytes(24).toString("hex");
    // `KUBEFN_BENCH_HOST_MEMORY_PROFILE=<dir>`: each host writes a V8 CPU profile there when it stops.
    const profile = process.env.KUBEFN_BENCH_HOST_MEMORY_PROFILE;
    // The image's process, laid out once if a variant asks for it.
    const image = variants.some((v) => parseHostMemoryVariant(v).image)
      ? await imageCommand(join(temp.path, "image"))
      : undefined;
    const start = async (variant = "") => {
      const { image: asImage, nodeArgs } = parseHostMemoryVariant(variant);
      const command: HostCommand = asImage && image ? image : startShCommand;
      const started = await startHost(
        {
          KUBECONFIG: kubeconfig,
          KUBEFN_AUDIT_TOKEN: intakeToken,
          NODE_OPTIONS: [
            `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${temp.path}`,
            profile ? `--cpu-prof --cpu-prof-dir=${profile}` : "",
          ]
            .filter((o) => o !== "")
            .join(" "),
        },
        180_000,
        // After the command's own options on the command line: a variant overrides them.
        nodeArgs,
        command,
      );
      tee.intake = { url: `${started.url}/v1/events`, token: intakeToken };
      return started;
    };
    host = await start();
    const proxy = (i: number): KubeObject => ({
      apiVersion: `${proxyResource.group}/${proxyResource.version}`,
      kind: "Proxy",
      metadata: { namespace: NAMESPACE, name: `ext-${i}` },
      spec: {
        mode: "External",
        endpoint: {
          host: "127.0.0.1",
          port: fixtures.ports.proxies[i % fixtures.ports.proxies.length]!,
          scheme: "http",
        },
        healthCheck: { probeURL: `http://127.0.0.1:${fixtures.ports.target}/`, successThreshold: 1 },
      },
    });
    const measured: HostMemoryStep[] = [];
    let created = 0;
    for (const size of steps) {
      const fresh = Array.from({ length: size - created }, (_, k) => proxy(created + k));
      await createAll(admin, fresh);
      created = size;
      await readyAll(admin, size);
      for (const variant of variants) {
        process.stderr.write(`host-memory: ${size} Proxies Ready; a fresh host ${variant} …\n`);
        await host.stop();
        host = await start(variant);
        measured.push(await measure(host, size, variant, fixtures, temp.path));
      }
    }
    return report(measured);
  } finally {
    if (host) cleanups.unshift(() => host!.stop());
    for (const cleanup of cleanups) {
      try {
        await cleanup();
      } catch {
        // Best effort: the devcluster exits with its parent anyway.
      }
    }
    process.removeListener("exit", killHost);
  }
}

/** One fresh host's window over `size` Proxies, then its heap snapshot. */
async function measure(
  host: HostProcess,
  size: number,
  nodeOptions: string,
  fixtures: { hits(): Promise<number> },
  dir: string,
): Promise<HostMemoryStep> {
  // Its full sweep, then one ordinary sweep with its probes planned: steady from here.
  await sweeps(host, 2, 300_000);
  await sleep(5000);
  const pid = host.child.pid!;
  const u0 = procUsage(pid);
  const h0 = await fixtures.hits();
  const t0 = Date.now();
  const rss: number[] = [];
  while (Date.now() - t0 < WINDOW_MS) {
    await sleep(1000);
    rss.push(procUsage(pid).rssMiB);
  }
  const u1 = procUsage(pid);
  const minutes = (Date.now() - t0) / 60_000;
  const probes = (await fixtures.hits()) - h0;
  const heapUsed = await gauge(host, "nodejs_heap_size_used_bytes");
  const heapTotal = await gauge(host, "nodejs_heap_size_total_bytes");
  const residentMiB = residentOf(pid);
  const loadAverage = loadavg().map((l) => round(l, 2)) as [number, number, number];
  const byConstructor = await snapshotOf(host, dir);
  const step: HostMemoryStep = {
    proxies: size,
    nodeOptions,
    rssMaxMiB: round(Math.max(...rss), 1),
    rssMeanMiB: round(rss.reduce((a, b) => a + b, 0) / rss.length, 1),
    heapUsedMiB: round(heapUsed / 2 ** 20, 1),
    heapTotalMiB: round(heapTotal / 2 ** 20, 1),
    residentMiB,
    snapshotMiB: round(
      Object.values(byConstructor).reduce((a, b) => a + b, 0),
      1,
    ),
    cpuMsPerMinute: round((u1.userMs + u1.systemMs - u0.userMs - u0.systemMs) / minutes, 0),
    systemMsPerMinute: round((u1.systemMs - u0.systemMs) / minutes, 0),
    probesPerMinute: round(probes / minutes, 0),
    loadAverage,
    byConstructor,
  };
  process.stderr.write(
    `host-memory: ${size} Proxies${nodeOptions ? ` (${nodeOptions})` : ""}: RSS max ${step.rssMaxMiB} MiB (mean ${step.rssMeanMiB}), heap ${step.heapUsedMiB}/${step.heapTotalMiB} MiB used/committed (snapshot ${step.snapshotMiB}), resident malloc ${residentMiB.malloc} anon ${residentMiB.anonymous} binary ${residentMiB.binary}, CPU ${step.cpuMsPerMinute} ms/min (${step.systemMsPerMinute} kernel) for ${step.probesPerMinute} probes/min, load ${loadAverage.join(" ")}\n`,
  );
  return step;
}

/** The rows and JSON of the measured steps (pure): each measurement, then each variant's slopes. */
export function report(measured: HostMemoryStep[]): { rows: BenchRow[]; json: Record<string, unknown> } {
  const variants = [...new Set(measured.map((s) => s.nodeOptions))];
  const label = (v: string) => (v === "" ? "" : ` (${v})`);
  const rows: BenchRow[] = measured.map((s) => ({
    name: `host-memory ${s.proxies} Proxies${label(s.nodeOptions)}`,
    figure: `${s.rssMaxMiB} / ${s.heapUsedMiB}`,
    unit: "MiB RSS max / heap used",
    note: `RSS mean ${s.rssMeanMiB}; heap committed ${s.heapTotalMiB}; resident malloc ${s.residentMiB.malloc}, anonymous ${s.residentMiB.anonymous}, binary ${s.residentMiB.binary}; snapshot ${s.snapshotMiB} MiB live; CPU ${s.cpuMsPerMinute} ms/min (${s.systemMsPerMinute} kernel), ${s.probesPerMinute} probes/min${s.probesPerMinute > 0 ? ` → ${round(s.cpuMsPerMinute / s.probesPerMinute, 3)} ms a probe` : ""}; load ${s.loadAverage.join(" ")}`,
  }));
  const slopes: Record<string, unknown> = {};
  for (const v of variants) {
    const mine = measured.filter((s) => s.nodeOptions === v);
    const first = mine[0]!;
    const last = mine.at(-1)!;
    const thousands = (last.proxies - first.proxies) / 1000;
    const slope = (f: (s: HostMemoryStep) => number) =>
      thousands > 0 ? round((f(last) - f(first)) / thousands, 1) : null;
    const extraProbes = last.probesPerMinute - first.probesPerMinute;
    const marginalCpuMsPerProbe =
      extraProbes > 0 ? round((last.cpuMsPerMinute - first.cpuMsPerMinute) / extraProbes, 3) : null;
    const grew = Object.entries(last.byConstructor)
      .map(([k, n]) => [k, round(n - (first.byConstructor[k] ?? 0), 2)] as const)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 10);
    slopes[v] = {
      rssMiBPer1000Proxies: slope((s) => s.rssMaxMiB),
      liveHeapMiBPer1000Proxies: slope((s) => s.snapshotMiB),
      marginalCpuMsPerProbe,
      grewMost: Object.fromEntries(grew),
    };
    rows.push(
      {
        name: `host-memory RSS per 1,000 Proxies${label(v)}`,
        figure: slope((s) => s.rssMaxMiB) ?? "n/a",
        unit: "MiB",
        note: `RSS max ${first.proxies} → ${last.proxies} Proxies; live heap ${slope((s) => s.snapshotMiB) ?? "n/a"} MiB per 1,000`,
      },
      {
        name: `host-memory CPU of one more probe${label(v)}`,
        figure: marginalCpuMsPerProbe ?? "n/a",
        unit: "CPU ms",
        note: `(CPU/min at ${last.proxies} − at ${first.proxies}) ÷ (probes/min at ${last.proxies} − at ${first.proxies})`,
      },
      {
        name: `host-memory live heap grown most${label(v)}`,
        figure: grew[0]?.[1] ?? "n/a",
        unit: "MiB",
        note: grew.map(([k, n]) => `${k} +${n}`).join(", "),
      },
    );
  }
  return {
    rows,
    json: {
      bench: "host-memory",
      steps: measured.map((s) => ({
        ...s,
        byConstructor: Object.fromEntries(Object.entries(s.byConstructor).slice(0, 25)),
      })),
      slopes,
    },
  };
}

async function createAll(admin: Kube, objects: KubeObject[]): Promise<void> {
  await mapWithConcurrency(objects, 32, async (o) => {
    try {
      await admin.create(proxyResource, o);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  });
}

async function readyAll(admin: Kube, n: number): Promise<void> {
  const deadline = Date.now() + Math.max(300_000, n * 200);
  for (;;) {
    // A list that times out on a loaded machine is polled again, not the bench's failure.
    const ready = await listAll<KubeObject & { status?: { phase?: string } }>(admin, proxyResource, {
      namespace: NAMESPACE,
    }).then(
      (listed) => listed.filter((p) => p.status?.phase === "Ready").length,
      () => 0,
    );
    if (ready >= n) return;
    if (Date.now() > deadline) throw new Error(`${ready}/${n} Proxies Ready at the deadline`);
    await sleep(5000);
  }
}
