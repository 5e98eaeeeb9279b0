/**
 * `npm run bench -- workerd-profile`: where the Worker's isolate spends its CPU on the probe path.
 * The setup of `workerd-probe-cpu.ts` (the Worker in workerd, one second's shards of 300 Proxies
 * on its own queue every second, probed through `cloudflare:sockets` and the bench's forward
 * proxies), then a second window as long with V8's sampling profiler on the Worker's isolate
 * (workerd's inspector). Prints the isolate's busy ms per probe beside workerd's /proc CPU per
 * probe (the process also runs miniflare's queue broker and the dev server's proxy), and the
 * busy time by phase.
 */
import type { BenchRow } from "./cluster.ts";
import type { PhaseRule } from "./cpu-profile.ts";
import { startFixtures } from "./sweep.ts";
import { measureWorkerdProbeCpu } from "./workerd-probe-cpu.ts";

const PROXIES_PER_SECOND = Number(process.env.KUBEFN_BENCH_PROFILE_PROXIES ?? 300);
const SEAL_KEY = "workerd-profile-seal-key-0123456789abcdef";

/**
 * The probe path's phases by function name (the bundle unminified), innermost first: a sample
 * goes to the first rule naming a frame of its stack, from the innermost frame out.
 */
export const PROBE_PATH_PHASES: readonly PhaseRule[] = [
  { phase: "garbage collector", functions: /^\(garbage collector\)$/ },
  { phase: "outside JS (program)", functions: /^\(program\)$/ },
  { phase: "runtime callbacks (no JS frame)", functions: /^\(native\)$/ },
  {
    phase: "timers",
    functions: /^(setTimeout|clearTimeout|Timeout|addDeadline|armTimer|disarmTimer|fireDue)$/,
  },
  { phase: "shard expansion: gunzip, JSON", functions: /^(expandedBody|gunzip\w*|gunzipped\w*)$/ },
  { phase: "MAC checks", functions: /^(mac\d*|canonicalJson\d*|sign|verify\w*|opened\w*)$/ },
  { phase: "trust checks (probe target screening)", functions: /^(screenProbeTarget|checkProbeTarget)$/ },
  { phase: "telemetry (metrics)", functions: /^(update|labelPairs|dataPoint|flush)$/ },
  { phase: "log lines (console.log)", functions: /^(emit|out|info|warn|debug)$/ },
  {
    phase: "socket prober",
    functions:
      /^(exchange|exchangeStatus|send\d*|readHead|readUntil|readFullHead|statusOf|requestHead|latin1|concat|indexOfCrLf)$/,
  },
  { phase: "kube reads and writes", functions: /^(applyHealthSweep|request\w*|fetchJson\w*|guarded\w*)$/ },
  {
    phase: "health state (record, encode, decode)",
    functions:
      /^(record\d*|recordProbe|unreportedState|encodeHealthState|decodeHealthState|healthStatusPatch|subjectFor|proxyHealthSubject)$/,
  },
  { phase: "zod parse", functions: /^(inst\._zod\.\w+|safeParse|runChecks)$/ },
];

export async function benchWorkerdProfile(): Promise<BenchRow[]> {
  const fixtures = await startFixtures(4);
  try {
    const r = await measureWorkerdProbeCpu({
      proxiesPerSecond: PROXIES_PER_SECOND,
      ports: fixtures.ports,
      hits: fixtures.hits,
      sealKey: SEAL_KEY,
      shardSize: 300,
      maxMessageBytes: 240_000,
      maxCarriedBytes: 64_000,
      seconds: Number(process.env.KUBEFN_BENCH_PROFILE_SECONDS ?? 15),
      profile: {
        intervalUs: 500,
        phases: PROBE_PATH_PHASES,
        ...(process.env.KUBEFN_BENCH_PROFILE_OUT ? { out: process.env.KUBEFN_BENCH_PROFILE_OUT } : {}),
      },
    });
    const p = r.profiled!;
    const b = p.breakdown;
    const round = (n: number, d = 3) => Math.round(n * 10 ** d) / 10 ** d;
    console.log(
      JSON.stringify({
        bench: "workerd-profile",
        ...r,
        profiled: { ...p, breakdown: { ...b, topSelf: b.topSelf } },
      }),
    );
    return [
      {
        name: "workerd-profile /proc",
        figure: round(r.msPerProbe),
        unit: "CPU ms per probe (workerd process, unprofiled window)",
        note: `${r.probes} probes in ${round(r.seconds, 1)} s; ${round(r.activeCpuMs)} ms less ${round(r.idleCpuMs)} idle`,
      },
      {
        name: "workerd-profile isolate",
        figure: round(p.isolateMsPerProbe),
        unit: "sampled ms per probe (the Worker's isolate; wall time of its busy samples)",
        note: `${p.probes} probes; ${b.busySamples} busy samples, ${round(b.busyMs)} ms of ${round(b.spanMs)}; /proc in the same window ${round(p.procMsPerProbe)} ms a probe`,
      },
      ...b.phases.map((x) => ({
        name: `  ${x.phase}`,
        figure: round((100 * x.samples) / b.busySamples, 1),
        unit: "% of the isolate's busy samples",
        note: `${x.samples} samples; ${round(x.ms / p.probes, 4)} sampled ms per probe`,
      })),
    ];
  } finally {
    await fixtures.stop();
  }
}
