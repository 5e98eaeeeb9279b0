import type { PassRecord } from "./pass-history.ts";
import type { FleetKind, FleetView, LatencyHistogram } from "./read.ts";
import type { Tone } from "./state.ts";

/** One cluster's part of a view of the page. */
export interface FleetGroupView {
  /** The declared cluster's name: the group's heading when the page shows several. */
  cluster: string;
  view: FleetView;
  /** Whether this view sent the lists (false: another view's read, shared). */
  fresh: boolean;
  passes: readonly PassRecord[];
  /** Whether kubefn reconciles there: its admission policies as last checked (absent: not checked yet). */
  admission?: AdmissionView;
}

/** What one view of the page shows: one group per cluster, in the declared order. */
export interface FleetPageInput {
  groups: readonly [FleetGroupView, ...FleetGroupView[]];
  cacheSeconds: number;
  /**
   * Show condition messages. They can quote what the tenant wrote and what the platform answered
   * (addresses, provider errors): only for a viewer who presented the API token.
   */
  detailed: boolean;
  now: Date;
}

/** The admission gate's last check, as the page shows it. */
export interface AdmissionView {
  ready: boolean;
  /** What is missing, one phrase each. */
  problems: readonly string[];
}

/** Fill colours of the state tones, in the SVG bars and the CSS chips alike. */
export const toneColours: Readonly<Record<Tone, string>> = {
  good: "#2e7d32",
  bad: "#c62828",
  busy: "#f9a825",
  unknown: "#90a4ae",
};

/** Fill of the latency histogram's bars. */
export const chartColour = "#1565c0";

/**
 * The page's one stylesheet, inline and allowed by its hash in the Content-Security-Policy (no
 * `unsafe-inline`); the page has no script at all.
 */
export const fleetCss = `body{font:14px system-ui,sans-serif;margin:0;background:#fafafa}header{background:#263238;color:#fff;padding:8px 20px}main{padding:0 20px}td,th{padding:2px 12px 2px 0;text-align:left}.n{color:#546e7a}.c{padding:0 8px;border-radius:8px;color:#fff}${Object.entries(
  toneColours,
)
  .map(([tone, colour]) => `.${tone}{background:${colour}}`)
  .join("")}.busy{color:#000}`;

/**
 * The fleet page: each operator's primaries by state, probe latency as an inline SVG histogram,
 * the last passes this instance ran, and what the view cost. A fleet's page has a section per
 * cluster, headed by the cluster's name, with all of that for the cluster alone. Every string from
 * a cluster or a pass goes through {@link escapeHtml}; the only attribute values are numbers and
 * tones.
 */
export function renderFleetPage(input: FleetPageInput): string {
  const { groups, now } = input;
  const [only] = groups;
  const head =
    groups.length === 1
      ? `read at ${only.view.readAt.toISOString()}; ${costOf(only, input)}`
      : `${groups.length} clusters; ${fleetCostOf(groups, input.cacheSeconds)}`;
  const body =
    groups.length === 1
      ? groupBody(only, input.detailed, now, "h2")
      : groups
          .map(
            (g) =>
              `<section><h2>Cluster ${escapeHtml(g.cluster)}</h2><p class="n">read at ${g.view.readAt.toISOString()}; ${costOf(g, input)}</p>${groupBody(g, input.detailed, now, "h3")}</section>`,
          )
          .join("");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kubefn fleet</title><style>${fleetCss}</style></head><body><header><h1>kubefn fleet</h1>${head}</header><main>${
    input.detailed
      ? ""
      : '<p class="n">No API token is set, so this page is open and hides condition messages.</p>'
  }${body}</main></body></html>`;
}

type Heading = "h2" | "h3";

function groupBody(g: FleetGroupView, detailed: boolean, now: Date, h: Heading): string {
  return `${admissionSection(g.admission, h)}${g.view.kinds.map((kind) => kindSection(kind, detailed, h)).join("")}${latencySection(g.view.latency, h)}${passesSection(g.passes, now, h)}`;
}

const listRequests = (n: number) => `${n} list request${n === 1 ? "" : "s"}`;

function costOf(g: FleetGroupView, input: Pick<FleetPageInput, "cacheSeconds" | "now">): string {
  const lists = listRequests(g.view.lists);
  return g.fresh
    ? `this view sent ${lists} to the API server`
    : `this view sent none: it shows the read of ${secondsSince(g.view.readAt.getTime(), input.now)} s ago (${lists}; views within ${input.cacheSeconds} s share one read)`;
}

function fleetCostOf(groups: readonly FleetGroupView[], cacheSeconds: number): string {
  const sent = groups.filter((g) => g.fresh).reduce((sum, g) => sum + g.view.lists, 0);
  return `this view sent ${listRequests(sent)} to the clusters' API servers (views within ${cacheSeconds} s share each cluster's read)`;
}

/** A warning while kubefn does not reconcile for want of its admission policies; nothing otherwise. */
function admissionSection(admission: AdmissionView | undefined, h: Heading): string {
  if (!admission || admission.ready) return "";
  const items = admission.problems.map((p) => `<li>${escapeHtml(p)}</li>`).join("");
  return `<section><${h}><span class="c bad">Not reconciling</span></${h}><p>kubefn's admission policies are not installed and bound, so kubefn runs no pass and no sweep (its writes would not be contained). Apply infra/rbac (<code>kubefn install</code>); kubefn checks again on its own.</p><ul>${items}</ul></section>`;
}

/** Text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const chip = (tone: Tone, text: string) => `<span class="c ${tone}">${escapeHtml(text)}</span>`;
const table = (head: string[], rows: string[][]) =>
  `<table><tr><th>${head.join("</th><th>")}</th></tr>${rows.map((r) => `<tr><td>${r.join("</td><td>")}</td></tr>`).join("")}</table>`;

function kindSection(kind: FleetKind, detailed: boolean, h: Heading): string {
  let x = 0;
  const bar = kind.states.map(({ tone, count }) => {
    const w = (count / kind.total) * 480;
    x += w;
    return `<rect x="${(x - w).toFixed(1)}" width="${w.toFixed(1)}" height="18" fill="${toneColours[tone]}"></rect>`;
  });
  const rows = kind.shown.map((o) => [
    escapeHtml(o.namespace ? `${o.namespace}/${o.name}` : o.name),
    chip(o.tone, o.state),
    escapeHtml(o.reason ?? ""),
    o.latencyMillis === undefined ? "" : `${o.latencyMillis} ms`,
    escapeHtml(o.changedAt ?? ""),
    ...(detailed ? [escapeHtml(truncate(o.message ?? "", 300))] : []),
  ]);
  const more = kind.total - kind.shown.length;
  return `<${h}>${escapeHtml(kind.kind)}: ${kind.total}</${h}>${
    kind.error ? `<p>${chip("bad", `the list failed (${kind.error}); the counts may be partial`)}</p>` : ""
  }${kind.total ? `<svg width="480" height="18">${bar.join("")}</svg>` : ""}<p>${
    kind.states.map((s) => chip(s.tone, `${s.state} ${s.count}`)).join(" ") || "none"
  }</p>${
    rows.length
      ? table(["object", "state", "reason", "latency", "changed", ...(detailed ? ["message"] : [])], rows)
      : ""
  }${more > 0 ? `<p class="n">and ${more} more</p>` : ""}`;
}

function latencySection(h: LatencyHistogram, level: Heading): string {
  const title = `<${level}>Probe latency</${level}>`;
  if (h.probed === 0) return `${title}<p class="n">No object reports a probe latency yet.</p>`;
  const label = (i: number) => {
    const b = h.bounds[i] ?? h.bounds.at(-1)!;
    return `${i < h.bounds.length ? "≤" : ">"}${b < 1000 ? b : `${b / 1000}s`}`;
  };
  const most = Math.max(...h.counts);
  const bars = h.counts.map((count, i) => {
    const height = count && Math.max(2, Math.round((count / most) * 100));
    const x = i * 52 + 22;
    return `<rect x="${x - 22}" y="${114 - height}" width="44" height="${height}" fill="${chartColour}"></rect><text x="${x}" y="${110 - height}">${count || ""}</text><text x="${x}" y="130">${label(i)}</text>`;
  });
  return `${title}<svg width="${h.counts.length * 52}" height="136" font-size="11" text-anchor="middle">${bars.join(
    "",
  )}</svg><p class="n">${h.probed} objects report one (ms, the last status-affecting probe); the slowest ${h.maxMillis} ms.</p>`;
}

function passesSection(passes: readonly PassRecord[], now: Date, h: Heading): string {
  const rows = passes.map((p) => [
    `${secondsSince(p.at, now)} s ago`,
    escapeHtml(p.key),
    escapeHtml(p.trigger),
    chip(p.result === "error" ? "bad" : "good", p.result),
    escapeHtml(
      [
        p.errorClass && `${p.errorClass}/${p.errorReason}`,
        p.wroteStatus && "wrote status",
        p.followUpSeconds !== undefined && `follow-up in ${p.followUpSeconds} s`,
      ]
        .filter(Boolean)
        .join(", "),
    ),
    `${Math.round(p.durationMs)} ms`,
  ]);
  return `<${h}>Last passes</${h}><p class="n">Run by this instance (in memory, the last 50; a serverless instance shows only its own).</p>${
    rows.length ? table(["when", "object", "why it ran", "result", "outcome", "took"], rows) : "None yet."
  }`;
}

const secondsSince = (ms: number, now: Date) => Math.max(0, Math.round((now.getTime() - ms) / 1000));

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
