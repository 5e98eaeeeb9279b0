import type { PassRecord } from "./pass-history.ts";
import type { FleetKind, FleetView, LatencyHistogram } from "./read.ts";
import type { Tone } from "./state.ts";

/** What one view of the page shows. */
export interface FleetPageInput {
  view: FleetView;
  /** Whether this view sent the lists (false: another view's read, shared). */
  fresh: boolean;
  cacheSeconds: number;
  passes: readonly PassRecord[];
  /**
   * Show condition messages. They can quote what the tenant wrote and what the platform answered
   * (addresses, provider errors): only for a viewer who presented the API token.
   */
  detailed: boolean;
  now: Date;
  /** Whether kubefn reconciles: its admission policies as last checked (absent: not checked yet). */
  admission?: AdmissionView;
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
 * the last passes this instance ran, and what the view cost. Every string from the cluster or a
 * pass goes through {@link escapeHtml}; the only attribute values are numbers and tones.
 */
export function renderFleetPage(input: FleetPageInput): string {
  const { view, now } = input;
  const lists = `${view.lists} list request${view.lists === 1 ? "" : "s"}`;
  const cost = input.fresh
    ? `this view sent ${lists} to the API server`
    : `this view sent none: it shows the read of ${secondsSince(view.readAt.getTime(), now)} s ago (${lists}; views within ${input.cacheSeconds} s share one read)`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kubefn fleet</title><style>${fleetCss}</style></head><body><header><h1>kubefn fleet</h1>read at ${view.readAt.toISOString()}; ${cost}</header><main>${
    input.detailed
      ? ""
      : '<p class="n">No API token is set, so this page is open and hides condition messages.</p>'
  }${admissionSection(input.admission)}${view.kinds.map((kind) => kindSection(kind, input.detailed)).join("")}${latencySection(view.latency)}${passesSection(input.passes, now)}</main></body></html>`;
}

/** A warning while kubefn does not reconcile for want of its admission policies; nothing otherwise. */
function admissionSection(admission: AdmissionView | undefined): string {
  if (!admission || admission.ready) return "";
  const items = admission.problems.map((p) => `<li>${escapeHtml(p)}</li>`).join("");
  return `<section><h2><span class="c bad">Not reconciling</span></h2><p>kubefn's admission policies are not installed and bound, so kubefn runs no pass and no sweep (its writes would not be contained). Apply infra/rbac (<code>kubefn install</code>); kubefn checks again on its own.</p><ul>${items}</ul></section>`;
}

/** Text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const chip = (tone: Tone, text: string) => `<span class="c ${tone}">${escapeHtml(text)}</span>`;
const table = (head: string[], rows: string[][]) =>
  `<table><tr><th>${head.join("</th><th>")}</th></tr>${rows.map((r) => `<tr><td>${r.join("</td><td>")}</td></tr>`).join("")}</table>`;

function kindSection(kind: FleetKind, detailed: boolean): string {
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
  return `<h2>${escapeHtml(kind.kind)}: ${kind.total}</h2>${
    kind.error ? `<p>${chip("bad", `the list failed (${kind.error}); the counts may be partial`)}</p>` : ""
  }${kind.total ? `<svg width="480" height="18">${bar.join("")}</svg>` : ""}<p>${
    kind.states.map((s) => chip(s.tone, `${s.state} ${s.count}`)).join(" ") || "none"
  }</p>${
    rows.length
      ? table(["object", "state", "reason", "latency", "changed", ...(detailed ? ["message"] : [])], rows)
      : ""
  }${more > 0 ? `<p class="n">and ${more} more</p>` : ""}`;
}

function latencySection(h: LatencyHistogram): string {
  if (h.probed === 0) return '<h2>Probe latency</h2><p class="n">No object reports a probe latency yet.</p>';
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
  return `<h2>Probe latency</h2><svg width="${h.counts.length * 52}" height="136" font-size="11" text-anchor="middle">${bars.join(
    "",
  )}</svg><p class="n">${h.probed} objects report one (ms, the last status-affecting probe); the slowest ${h.maxMillis} ms.</p>`;
}

function passesSection(passes: readonly PassRecord[], now: Date): string {
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
  return `<h2>Last passes</h2><p class="n">Run by this instance (in memory, the last 50; a serverless instance shows only its own).</p>${
    rows.length ? table(["when", "object", "why it ran", "result", "outcome", "took"], rows) : "None yet."
  }`;
}

const secondsSince = (ms: number, now: Date) => Math.max(0, Math.round((now.getTime() - ms) / 1000));

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
