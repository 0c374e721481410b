/**
 * The what-if kind's comparison view: a Gantt of the most changed jobs in both
 * cases (a bar per job per case, first start → completion, restarts marked) and
 * the time series of both cases overlaid (utilisation, power, availability, the
 * queue: waiting jobs and queued card demand; PUE
 * when the facility part is there), and with a plant the fixed point of the plant ↔
 * jobs composition (rounds, converged, residual) and the racks' time to their thermal
 * limit and trips, soonest first ("rack 12: 90 s").
 *
 * The data functions are pure (vitest-covered) and read the result the kind
 * returns (`jobs.rows`, `baseline.series`, `perturbed.series`, `facility`);
 * `renderWhatIf` draws them under the comparison table (scenariorender.ts).
 */
import uPlot from "uplot";

import { h } from "./dom";
import { formatNumber } from "./format";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

export type Case = "baseline" | "perturbed";

/** One bar of the Gantt: a job in one case, from x0 to x1 (seconds from the fork). */
export interface GanttBar {
  case: Case;
  x0: number;
  x1: number;
  /** Started before the fork (the bar is clipped at 0). */
  before: boolean;
  /** Not complete by the horizon (the bar runs to the end, open). */
  open: boolean;
  restarts: number;
  cancelled: boolean;
}

export interface GanttRow {
  job: string;
  name: string;
  bars: GanttBar[];
}

export interface Gantt {
  rows: GanttRow[];
  /** The time axis, seconds from the fork: 0 → the horizon (else the last sample or completion). */
  end: number;
}

/**
 * The Gantt of a what-if result: the first `limit` jobs of its table (the most changed
 * first, as the kind orders them), one bar per case that started. A job that started
 * before the fork starts at 0; one not complete by the horizon runs to `end`.
 */
export function ganttLayout(result: unknown, limit = 20): Gantt | null {
  if (!isObj(result) || !isObj(result.jobs) || !Array.isArray(result.jobs.rows)) return null;
  const rows = result.jobs.rows.filter(isObj).slice(0, limit);
  const times: number[] = [];
  for (const key of ["baseline", "perturbed"] as const) {
    const c = result[key];
    const t = isObj(c) && isObj(c.series) && Array.isArray(c.series.t_s) ? c.series.t_s : [];
    for (const v of t) if (num(v) !== null) times.push(v as number);
  }
  for (const r of rows) {
    for (const k of ["baseline_completion_s", "completion_s"]) {
      const v = num(r[k]);
      if (v !== null) times.push(v);
    }
  }
  // the horizon (the kind's `horizon_h`); else the last sample or completion
  const horizon = num(result.horizon_h);
  const end = horizon !== null && horizon > 0 ? horizon * 3600 : times.length ? Math.max(...times) : 0;
  if (!rows.length || end <= 0) return null;
  const out: GanttRow[] = rows.map((r) => {
    const bars: GanttBar[] = [];
    const cases: [Case, string, string][] = [
      ["baseline", "baseline_start_s", "baseline_completion_s"],
      ["perturbed", "start_s", "completion_s"],
    ];
    for (const [c, startKey, endKey] of cases) {
      const start = num(r[startKey]);
      if (start === null) continue; // never started in this case
      const stop = num(r[endKey]);
      bars.push({
        case: c,
        x0: Math.max(0, start),
        x1: Math.min(end, stop ?? end),
        before: start < 0,
        open: stop === null,
        // restarts and cancellation are what the perturbation did: the perturbed case's
        restarts: c === "perturbed" ? (num(r.restarts) ?? 0) : 0,
        cancelled: c === "perturbed" && r.cancelled === true,
      });
    }
    return {
      job: typeof r.job === "number" || typeof r.job === "string" ? String(r.job) : "?",
      name: typeof r.name === "string" ? r.name : "",
      bars,
    };
  });
  return { rows: out, end };
}

/** One chart: x in hours from the fork, the baseline and the what if as two series. */
export interface WhatIfChart {
  id: string;
  title: string;
  yLabel: string;
  x: number[];
  baseline: (number | null)[];
  perturbed: (number | null)[];
}

/**
 * Two step series sampled at different times, on one x (the union of both, sorted):
 * each side carries its last value forward (the engine's series are step functions).
 */
export function alignSeries(
  ta: number[],
  ya: (number | null)[],
  tb: number[],
  yb: (number | null)[],
): { x: number[]; a: (number | null)[]; b: (number | null)[] } {
  const x = [...new Set([...ta, ...tb])].sort((p, q) => p - q);
  const hold = (t: number[], y: (number | null)[]): (number | null)[] => {
    let i = -1;
    return x.map((xv) => {
      while (i + 1 < t.length && t[i + 1] <= xv) i++;
      return i < 0 ? null : (y[i] ?? null);
    });
  };
  return { x, a: hold(ta, ya), b: hold(tb, yb) };
}

function seriesOf(c: unknown, key: string): { t: number[]; y: (number | null)[] } | null {
  if (!isObj(c) || !isObj(c.series)) return null;
  const t = c.series.t_s;
  const y = c.series[key];
  if (!Array.isArray(t) || !Array.isArray(y) || t.length !== y.length || !t.length) return null;
  return { t: t.map((v) => num(v) ?? 0), y: y.map(num) };
}

const CHARTS: [string, string, string, "cases" | "facility"][] = [
  ["utilisation", "Utilisation", "share of cards", "cases"],
  ["power_kw", "IT power", "kW", "cases"],
  ["availability", "Availability", "share of cards", "cases"],
  ["waiting_jobs", "Waiting jobs", "jobs", "cases"],
  ["queued_cards", "Queued card demand", "cards", "cases"],
  ["pue", "PUE", "PUE", "facility"],
];

/** The overlaid time series of a what-if result (hours on x); PUE only with a plant. */
export function whatifCharts(result: unknown): WhatIfChart[] {
  if (!isObj(result)) return [];
  const out: WhatIfChart[] = [];
  for (const [key, title, yLabel, from] of CHARTS) {
    const src = from === "cases" ? result : isObj(result.facility) ? result.facility : null;
    if (!src) continue;
    const b = seriesOf(src.baseline, key);
    const p = seriesOf(src.perturbed, key);
    if (!b || !p) continue;
    const { x, a, b: y } = alignSeries(b.t, b.y, p.t, p.y);
    out.push({ id: key, title, yLabel, x: x.map((t) => t / 3600), baseline: a, perturbed: y });
  }
  return out;
}

/** One rack the plant limited in a what-if: its time to the thermal limit and its trips
 * (per case; null: not limited in that case). */
export interface RackLimit {
  rack: number;
  perturbed: number | null;
  baseline: number | null;
  trips: number;
  baselineTrips: number;
}

function caseRacks(facility: Obj, key: Case): Map<number, { t: number | null; trips: number }> {
  const out = new Map<number, { t: number | null; trips: number }>();
  const c = facility[key];
  const r = isObj(c) && isObj(c.racks) ? c.racks : null;
  if (!r || !Array.isArray(r.ids)) return out;
  const t = Array.isArray(r.time_to_limit_s) ? r.time_to_limit_s : [];
  const trips = Array.isArray(r.trips) ? r.trips : [];
  r.ids.forEach((id, i) => {
    if (typeof id === "number") out.set(id, { t: num(t[i]), trips: num(trips[i]) ?? 0 });
  });
  return out;
}

/**
 * The racks the plant brought to their thermal limit or tripped in either case
 * (`facility.<case>.racks`: ids, time_to_limit_s, trips), soonest in the what if first
 * (then the baseline's, then by id); null when the result has no per-rack plant figures.
 */
export function rackLimits(result: unknown): RackLimit[] | null {
  if (!isObj(result) || !isObj(result.facility)) return null;
  const p = caseRacks(result.facility, "perturbed");
  const b = caseRacks(result.facility, "baseline");
  if (!p.size && !b.size) return null;
  const ids = [...new Set([...p.keys(), ...b.keys()])];
  const inf = (v: number | null): number => v ?? Number.POSITIVE_INFINITY;
  return ids
    .map((rack) => ({
      rack,
      perturbed: p.get(rack)?.t ?? null,
      baseline: b.get(rack)?.t ?? null,
      trips: p.get(rack)?.trips ?? 0,
      baselineTrips: b.get(rack)?.trips ?? 0,
    }))
    .filter((r) => r.perturbed !== null || r.baseline !== null || r.trips > 0 || r.baselineTrips > 0)
    .sort((x, y) => inf(x.perturbed) - inf(y.perturbed) || inf(x.baseline) - inf(y.baseline) || x.rack - y.rack);
}

/** "rack 12: 90 s" — a rack's time to its limit, and its trips, in one case. */
export function rackLimitText(rack: number, t: number | null, trips: number): string {
  const time = t === null ? "not at its limit" : `${formatNumber(t)} s`;
  return `rack ${rack}: ${time}${trips ? `, ${trips} trip${trips > 1 ? "s" : ""}` : ""}`;
}

/** The plant composition's fixed point in one line per case: rounds, converged, residual. */
export function fixedPointLine(result: unknown): string | null {
  if (!isObj(result) || !isObj(result.facility)) return null;
  const parts: string[] = [];
  for (const [key, label] of [
    ["baseline", "baseline"],
    ["perturbed", "what if"],
  ] as const) {
    const c = result.facility[key];
    const fp = isObj(c) && isObj(c.fixed_point) ? c.fixed_point : null;
    if (!fp) continue;
    const rounds = num(fp.rounds);
    const res = num(fp.residual_kw);
    parts.push(
      `${label} ${rounds ?? "?"} round${rounds === 1 ? "" : "s"}, ` +
        `${fp.converged === true ? "converged" : "not converged"}, ` +
        `residual ${res === null ? "—" : `${formatNumber(res, 3)} kW`}`,
    );
  }
  return parts.length ? `Plant ↔ jobs fixed point: ${parts.join("; ")}` : null;
}

const SVG = "http://www.w3.org/2000/svg";
const COLOURS: Record<Case, string> = { baseline: "#8b949e", perturbed: "#da3633" };

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** The Gantt as SVG: a lane per job, the baseline bar above the what-if bar. */
function ganttSvg(g: Gantt): SVGElement {
  const label = 110;
  const width = 560;
  const lane = 22;
  const axis = 18;
  const scale = (t: number): number => label + ((width - label - 8) * t) / g.end;
  const root = svg("svg", {
    width,
    height: g.rows.length * lane + axis,
    viewBox: `0 0 ${width} ${g.rows.length * lane + axis}`,
    class: "tw-whatif-gantt",
    "data-testid": "whatif-gantt",
    "data-rows": g.rows.length,
  });
  g.rows.forEach((row, i) => {
    const y = i * lane;
    const text = svg("text", { x: 4, y: y + 15, fill: "#c9d1d9", "font-size": 11 });
    text.textContent = row.name ? `${row.job} ${row.name}`.slice(0, 18) : row.job;
    root.append(text);
    for (const bar of row.bars) {
      const by = y + (bar.case === "baseline" ? 3 : 12);
      const rect = svg("rect", {
        x: scale(bar.x0),
        y: by,
        width: Math.max(1, scale(bar.x1) - scale(bar.x0)),
        height: 7,
        fill: COLOURS[bar.case],
        "fill-opacity": bar.open ? 0.45 : 1,
        "data-testid": "whatif-gantt-bar",
        "data-job": row.job,
        "data-case": bar.case,
        "data-restarts": bar.restarts,
      });
      const title = svg("title", {});
      title.textContent =
        `${row.job} (${bar.case}): ${formatNumber(bar.x0 / 3600)} h → ` +
        `${bar.open ? "past the horizon" : `${formatNumber(bar.x1 / 3600)} h`}` +
        `${bar.before ? ", started before the fork" : ""}` +
        `${bar.restarts ? `, ${bar.restarts} restart(s)` : ""}${bar.cancelled ? ", cancelled" : ""}`;
      rect.append(title);
      root.append(rect);
      if (bar.restarts > 0) {
        const mark = svg("text", { x: scale(bar.x1) + 2, y: by + 7, fill: "#d29922", "font-size": 10 });
        mark.textContent = `↻${bar.restarts}`;
        root.append(mark);
      }
    }
  });
  const base = g.rows.length * lane;
  root.append(svg("line", { x1: label, x2: width - 8, y1: base + 2, y2: base + 2, stroke: "#98a2b3" }));
  for (const f of [0, 0.5, 1]) {
    const t = svg("text", {
      x: scale(f * g.end),
      y: base + 14,
      fill: "#98a2b3",
      "font-size": 10,
      "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle",
    });
    t.textContent = `${formatNumber((f * g.end) / 3600)} h`;
    root.append(t);
  }
  return root;
}

function chart(box: HTMLElement, c: WhatIfChart): uPlot {
  const axis = {
    stroke: "#98a2b3",
    grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
    ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
  };
  box.dataset.points = String(c.x.length);
  return new uPlot(
    {
      width: Math.max(260, Math.floor(box.clientWidth || 420)),
      height: 160,
      scales: { x: { time: false } },
      axes: [
        { ...axis, label: "hours from the fork" },
        { ...axis, label: c.yLabel, size: 56 },
      ],
      series: [
        { label: "h" },
        { label: "baseline", stroke: COLOURS.baseline, width: 1.5, paths: uPlot.paths.stepped?.({ align: 1 }) },
        { label: "what if", stroke: COLOURS.perturbed, width: 2, paths: uPlot.paths.stepped?.({ align: 1 }) },
      ],
    },
    [c.x, c.baseline, c.perturbed] as uPlot.AlignedData,
    box,
  );
}

/** The comparison view in `container` (Gantt, then the charts), or null with nothing to draw. */
export function renderWhatIf(container: HTMLElement, result: unknown): { destroy(): void } | null {
  const gantt = ganttLayout(result);
  const charts = whatifCharts(result);
  const fixed = fixedPointLine(result);
  const limits = rackLimits(result);
  if (!gantt && !charts.length && !fixed && !limits) return null;
  const panel = h("div", { class: "tw-whatif", "data-testid": "whatif-view" });
  container.append(panel);
  if (fixed) panel.append(h("p", { class: "tw-muted", "data-testid": "whatif-fixed-point" }, fixed));
  if (limits) {
    const shown = limits.slice(0, 20);
    const list = h("ol", {
      class: "tw-whatif-limits",
      "data-testid": "whatif-time-to-limit",
      "data-racks": String(limits.length),
    });
    for (const r of shown) {
      list.append(
        h(
          "li",
          { "data-rack": String(r.rack), "data-testid": "whatif-rack-limit" },
          `${rackLimitText(r.rack, r.perturbed, r.trips)} (baseline: ` +
            `${r.baseline === null ? "not at its limit" : `${formatNumber(r.baseline)} s`}` +
            `${r.baselineTrips ? `, ${r.baselineTrips} trip${r.baselineTrips > 1 ? "s" : ""}` : ""})`,
        ),
      );
    }
    if (limits.length > shown.length) list.append(h("li", {}, `… ${limits.length - shown.length} more`));
    if (!limits.length) list.append(h("li", { "data-testid": "whatif-rack-limit-none" }, "no rack reached its limit"));
    panel.append(h("h4", {}, "Racks at their thermal limit (time to limit, what if first)"), list);
  }
  if (gantt) {
    panel.append(
      h("h4", {}, "Most changed jobs (grey: baseline, red: what if; ↻ restarts)"),
      h("div", { class: "tw-chart" }, ganttSvg(gantt)),
    );
  }
  const plots: uPlot[] = [];
  for (const c of charts) {
    const box = h("div", { class: "tw-chart", "data-testid": `whatif-chart-${c.id}` });
    panel.append(h("h4", {}, c.title), box);
    plots.push(chart(box, c));
  }
  return { destroy: () => plots.forEach((p) => p.destroy()) };
}
