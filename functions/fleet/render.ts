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
 * The page's one stylesheet, served inline and allowed by its hash in the Content-Security-Policy
 * (no `unsafe-inline`); the page has no script at all.
 */
export const fleetCss = [
  "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#212121;background:#fafafa}",
  "header{background:#263238;color:#fff;padding:12px 20px}header h1{margin:0;font-size:20px}",
  "main{padding:8px 20px}section{margin:16px 0}h2{font-size:16px;margin:8px 0}",
  "table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}",
  "th{font-weight:600;border-bottom:1px solid #cfd8dc}.note{color:#546e7a}.warn{color:#c62828}",
  ".chip{display:inline-block;padding:0 8px;border-radius:8px;color:#fff;font-weight:600}",
  ...Object.entries(toneColours).map(([tone, colour]) => `.${tone}{background:${colour}}`),
  ".busy{color:#212121}.msg{max-width:40em;overflow-wrap:anywhere}",
].join("");

/**
 * The fleet page: each operator's primaries by state, probe latency as an inline SVG histogram,
 * the last passes this instance ran, and what the view cost. Every string from the cluster or a
 * pass goes through {@link escapeHtml}; nothing from them lands in an attribute but state tones
 * (a fixed set).
 */
export function renderFleetPage(input: FleetPageInput): string {
  const { view, now } = input;
  const age = Math.max(0, Math.round((now.getTime() - view.readAt.getTime()) / 1000));
  const cost = input.fresh
    ? `this view sent ${view.lists} list request${view.lists === 1 ? "" : "s"} to the API server`
    : `this view sent no API request: it shows the read of ${age} s ago (views within ${input.cacheSeconds} s share one read of ${view.lists} list request${view.lists === 1 ? "" : "s"})`;
  return [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="robots" content="noindex,nofollow"><meta name="referrer" content="no-referrer">',
    `<title>kubefn fleet</title><style>${fleetCss}</style></head><body>`,
    `<header><h1>kubefn fleet</h1><div>read at ${escapeHtml(view.readAt.toISOString())}; ${escapeHtml(cost)}</div></header><main>`,
    input.detailed
      ? ""
      : '<p class="note">No API token is set: anyone who reaches this address sees this page, so condition messages are hidden. Set API_TOKEN to require it and show them.</p>',
    ...view.kinds.map((kind) => kindSection(kind, input.detailed)),
    latencySection(view.latency),
    passesSection(input.passes, now),
    "</main></body></html>",
  ].join("");
}

/** Text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function kindSection(kind: FleetKind, detailed: boolean): string {
  const legend = kind.states
    .map(({ state, tone, count }) => `<span class="chip ${tone}">${escapeHtml(state)} ${count}</span>`)
    .join(" ");
  const rows = kind.shown.map((o) => {
    const key = o.namespace ? `${o.namespace}/${o.name}` : o.name;
    const cells = [
      escapeHtml(key),
      `<span class="chip ${o.tone}">${escapeHtml(o.state)}</span>`,
      escapeHtml(o.reason ?? ""),
      o.latencyMillis === undefined ? "" : `${o.latencyMillis} ms`,
      escapeHtml(o.changedAt ?? ""),
      ...(detailed ? [`<span class="msg">${escapeHtml(truncate(o.message ?? "", 300))}</span>`] : []),
    ];
    return `<tr><td>${cells.join("</td><td>")}</td></tr>`;
  });
  const more = kind.total - kind.shown.length;
  return [
    `<section><h2>${escapeHtml(kind.kind)} <span class="note">(${escapeHtml(kind.controller)}): ${kind.total}</span></h2>`,
    kind.error
      ? `<p class="warn">The list failed (${escapeHtml(kind.error)}); the counts may be partial.</p>`
      : "",
    stateBar(kind.states, kind.total),
    `<p>${legend || '<span class="note">none</span>'}</p>`,
    rows.length === 0
      ? ""
      : `<table><tr><th>object</th><th>state</th><th>reason</th><th>latency</th><th>changed</th>${detailed ? "<th>message</th>" : ""}</tr>${rows.join("")}</table>`,
    more > 0 ? `<p class="note">and ${more} more (those needing attention are listed first)</p>` : "",
    "</section>",
  ].join("");
}

function stateBar(states: FleetKind["states"], total: number): string {
  if (total === 0) return "";
  const width = 480;
  let x = 0;
  const rects = states.map(({ state, tone, count }) => {
    const w = (count / total) * width;
    const rect = `<rect x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="18" fill="${toneColours[tone]}"><title>${escapeHtml(state)}: ${count}</title></rect>`;
    x += w;
    return rect;
  });
  return `<svg class="bar" width="${width}" height="18" viewBox="0 0 ${width} 18" role="img" aria-label="objects by state">${rects.join("")}</svg>`;
}

function latencySection(h: LatencyHistogram): string {
  const head = "<section><h2>Probe latency</h2>";
  if (h.probed === 0) return `${head}<p class="note">No object reports a probe latency yet.</p></section>`;
  const labels = [
    ...h.bounds.map((b) => `≤${b < 1000 ? b : `${b / 1000}s`}`),
    `>${h.bounds.at(-1)! / 1000}s`,
  ];
  const barWidth = 44;
  const gap = 8;
  const plot = 100;
  const most = Math.max(...h.counts, 1);
  const bars = h.counts.map((count, i) => {
    const height = count === 0 ? 0 : Math.max(2, Math.round((count / most) * plot));
    const x = i * (barWidth + gap);
    return [
      `<rect x="${x}" y="${14 + plot - height}" width="${barWidth}" height="${height}" fill="${chartColour}"><title>${labels[i]} ms: ${count}</title></rect>`,
      count > 0
        ? `<text x="${x + barWidth / 2}" y="${10 + plot - height}" text-anchor="middle">${count}</text>`
        : "",
      `<text x="${x + barWidth / 2}" y="${plot + 30}" text-anchor="middle">${labels[i]}</text>`,
    ].join("");
  });
  const width = h.counts.length * (barWidth + gap);
  return [
    head,
    `<svg width="${width}" height="${plot + 36}" viewBox="0 0 ${width} ${plot + 36}" font-size="11" role="img" aria-label="probe latency histogram">`,
    bars.join(""),
    "</svg>",
    `<p class="note">${h.probed} object${h.probed === 1 ? "" : "s"} with a probe latency (the last status-affecting probe, ms); the slowest ${h.maxMillis} ms.</p></section>`,
  ].join("");
}

function passesSection(passes: readonly PassRecord[], now: Date): string {
  const head =
    '<section><h2>Last passes</h2><p class="note">Run by this instance since it started (kept in memory, the last 50; a serverless instance shows only its own).</p>';
  if (passes.length === 0) return `${head}<p class="note">None yet.</p></section>`;
  const rows = passes.map((p) => {
    const ago = Math.max(0, Math.round((now.getTime() - p.at) / 1000));
    const outcome = [
      p.result,
      p.errorClass ? `${p.errorClass}/${p.errorReason ?? ""}` : "",
      p.wroteStatus ? "wrote status" : "",
      p.followUpSeconds === undefined ? "" : `follow-up in ${p.followUpSeconds} s`,
      p.shard
        ? Object.entries(p.shard)
            .map(([k, v]) => `${k}=${v}`)
            .join(" ")
        : "",
    ]
      .filter((s) => s !== "")
      .join(", ");
    const tone = p.result === "error" ? "bad" : "good";
    return `<tr><td>${ago} s ago</td><td>${escapeHtml(p.key)}</td><td>${escapeHtml(p.trigger)}</td><td><span class="chip ${tone}">${escapeHtml(p.result)}</span></td><td>${escapeHtml(outcome)}</td><td>${Math.round(p.durationMs)} ms</td></tr>`;
  });
  return `${head}<table><tr><th>when</th><th>object</th><th>why it ran</th><th>result</th><th>outcome</th><th>took</th></tr>${rows.join("")}</table></section>`;
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
