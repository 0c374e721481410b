/**
 * The resilience kind's result panel: effective training time ratio (ETTR) against
 * the checkpoint interval with Young's, Daly's and the simulated optimum marked, a
 * failure timeline (each interruption a dot in its cause's lane, over days) and the
 * interruptions by cause.
 *
 * The data functions are pure (vitest-covered): they read the result the kind
 * returns (`ettr_curve`, `optimal_checkpoint_interval_min`, `timeline`,
 * `interruptions`). `renderResilience` draws them with uPlot; scenariorender.ts
 * calls it for a resilience run in place of the generic chart.
 */
import uPlot from "uplot";

import { h } from "./dom";
import { formatNumber } from "./format";
import type { Table } from "./scenarioresult";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** A vertical mark on the ETTR chart: a checkpoint interval worth pointing at. */
export interface Mark {
  label: string;
  interval_min: number;
  colour: string;
}

export interface EttrCurve {
  /** Checkpoint intervals (min), ascending. */
  x: number[];
  /** Simulated ETTR (mean over the histories) per interval. */
  ettr: (number | null)[];
  /** Daly's closed form at the same intervals. */
  daly: (number | null)[];
  marks: Mark[];
}

const MARK_COLOURS = { young: "#d29922", daly: "#a371f7", simulated: "#2ea043", chosen: "#8b949e" };

/** The ETTR curve and the optimal intervals of a resilience result, or null without one. */
export function ettrCurve(result: unknown): EttrCurve | null {
  if (!isObj(result) || !Array.isArray(result.ettr_curve)) return null;
  const rows = result.ettr_curve
    .filter(isObj)
    .map((r) => ({ x: num(r.interval_min), ettr: num(r.ettr), daly: num(r.ettr_daly) }))
    .filter((r): r is { x: number; ettr: number | null; daly: number | null } => r.x !== null && r.x > 0)
    .sort((a, b) => a.x - b.x);
  if (!rows.length) return null;
  const opt = isObj(result.optimal_checkpoint_interval_min) ? result.optimal_checkpoint_interval_min : {};
  const marks: Mark[] = [];
  const mark = (label: string, value: unknown, colour: string): void => {
    const v = num(value);
    if (v !== null && v > 0) marks.push({ label, interval_min: v, colour });
  };
  mark("Young", opt.young, MARK_COLOURS.young);
  mark("Daly", opt.daly, MARK_COLOURS.daly);
  mark("simulated optimum", opt.simulated, MARK_COLOURS.simulated);
  mark("this run", result.checkpoint_interval_min, MARK_COLOURS.chosen);
  return { x: rows.map((r) => r.x), ettr: rows.map((r) => r.ettr), daly: rows.map((r) => r.daly), marks };
}

export interface FailureTimeline {
  /** Causes, most frequent first: lane i is causes[i] (y = i). */
  causes: string[];
  /** Event times in days, ascending (the shared x of the lanes). */
  x: number[];
  /** Per cause, its lane index at the times of its events, null elsewhere. */
  lanes: (number | null)[][];
  /** Events per cause (the lanes' sizes). */
  counts: number[];
  days: number;
  truncated: boolean;
}

/** Each interruption of the timeline placed on its cause's lane, times in days. */
export function failureTimeline(result: unknown): FailureTimeline | null {
  if (!isObj(result) || !Array.isArray(result.timeline)) return null;
  const events = result.timeline
    .filter(isObj)
    .map((e) => ({
      t: num(e.t_s),
      cause: typeof e.cause === "string" ? e.cause : typeof e.class === "string" ? e.class : null,
    }))
    .filter((e): e is { t: number; cause: string } => e.t !== null && e.cause !== null)
    .sort((a, b) => a.t - b.t);
  if (!events.length) return null;
  const tally = new Map<string, number>();
  for (const e of events) tally.set(e.cause, (tally.get(e.cause) ?? 0) + 1);
  const causes = [...tally.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([c]) => c);
  const lane = new Map(causes.map((c, i) => [c, i]));
  const lanes = causes.map(() => new Array<number | null>(events.length).fill(null));
  events.forEach((e, i) => {
    const k = lane.get(e.cause) as number;
    lanes[k][i] = k;
  });
  return {
    causes,
    x: events.map((e) => e.t / 86400),
    lanes,
    counts: causes.map((c) => tally.get(c) ?? 0),
    days: num(result.days) ?? events[events.length - 1].t / 86400,
    truncated: result.timeline_truncated === true,
  };
}

/** Interruptions by cause: count, share of the total and, per class, the expected count. */
export function interruptionsTable(result: unknown): Table | null {
  if (!isObj(result) || !isObj(result.interruptions)) return null;
  const inter = result.interruptions;
  const byCause = isObj(inter.by_cause) ? inter.by_cause : isObj(inter.by_class) ? inter.by_class : null;
  if (!byCause) return null;
  const entries = Object.entries(byCause)
    .map(([cause, n]) => [cause, num(n) ?? 0] as const)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const total = num(inter.total) ?? entries.reduce((s, [, n]) => s + n, 0);
  const rows = entries.map(([cause, n]) => [
    cause,
    String(n),
    total > 0 ? `${formatNumber((100 * n) / total, 3)} %` : "—",
  ]);
  rows.push(["total", String(total), total > 0 ? "100 %" : "—"]);
  return { columns: ["cause", "interruptions", "share"], rows };
}

// --- drawing ------------------------------------------------------------------------------
const AXIS = {
  stroke: "#98a2b3",
  grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
  ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
};
const LANE_COLOURS = ["#da3633", "#4c8dff", "#d29922", "#2ea043", "#a371f7", "#39c5cf", "#db61a2", "#8b949e"];

/** A uPlot hook drawing a labelled vertical line at each mark's x. */
function marksPlugin(marks: Mark[]): uPlot.Plugin {
  return {
    hooks: {
      draw: [
        (u: uPlot) => {
          const ctx = u.ctx;
          const { top, height } = u.bbox;
          ctx.save();
          ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
          marks.forEach((m, i) => {
            const x = Math.round(u.valToPos(m.interval_min, "x", true));
            if (!Number.isFinite(x)) return;
            ctx.strokeStyle = m.colour;
            ctx.fillStyle = m.colour;
            ctx.lineWidth = devicePixelRatio;
            ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + height);
            ctx.stroke();
            ctx.fillText(m.label, x + 3 * devicePixelRatio, top + (12 + 12 * i) * devicePixelRatio);
          });
          ctx.restore();
        },
      ],
    },
  };
}

function width(container: HTMLElement): number {
  return Math.max(260, Math.floor(container.clientWidth || 420));
}

function ettrChart(box: HTMLElement, curve: EttrCurve): uPlot {
  const opts: uPlot.Options = {
    width: width(box),
    height: 240,
    scales: { x: { time: false, distr: 3, log: 10 }, y: { auto: true } },
    axes: [
      {
        ...AXIS,
        label: "Checkpoint interval (min)",
        values: (_u, v) => v.map((x) => (x === null ? "" : formatNumber(x))),
      },
      { ...AXIS, label: "ETTR", size: 60, values: (_u, v) => v.map((y) => (y === null ? "" : formatNumber(y, 3))) },
    ],
    series: [
      { label: "interval (min)", value: (_u, v) => (v === null ? "—" : formatNumber(v)) },
      { label: "simulated", stroke: "#4c8dff", width: 2.5, points: { show: true, size: 5 } },
      { label: "Daly (closed form)", stroke: "#a371f7", width: 1.25, dash: [5, 4], points: { show: false } },
    ],
    plugins: [marksPlugin(curve.marks)],
  };
  box.dataset.points = String(curve.x.length);
  box.dataset.marks = curve.marks.map((m) => m.label).join(",");
  return new uPlot(opts, [curve.x, curve.ettr, curve.daly] as uPlot.AlignedData, box);
}

function timelineChart(box: HTMLElement, tl: FailureTimeline): uPlot {
  const opts: uPlot.Options = {
    width: width(box),
    height: Math.max(140, 40 + 22 * tl.causes.length),
    scales: {
      x: { time: false, range: [0, Math.max(tl.days, tl.x[tl.x.length - 1])] },
      y: { range: [-0.6, tl.causes.length - 0.4] },
    },
    axes: [
      { ...AXIS, label: "Day", values: (_u, v) => v.map((x) => (x === null ? "" : formatNumber(x))) },
      {
        ...AXIS,
        size: 140,
        splits: () => tl.causes.map((_c, i) => i),
        values: (_u, v) => v.map((i) => (i === null ? "" : (tl.causes[i] ?? ""))),
      },
    ],
    series: [
      { label: "day", value: (_u, v) => (v === null ? "—" : formatNumber(v, 3)) },
      ...tl.causes.map((cause, i) => ({
        label: `${cause} (${tl.counts[i]})`,
        stroke: LANE_COLOURS[i % LANE_COLOURS.length],
        fill: LANE_COLOURS[i % LANE_COLOURS.length],
        paths: () => null,
        points: { show: true, size: 7, fill: LANE_COLOURS[i % LANE_COLOURS.length] },
        value: (_u: uPlot, v: number | null) => (v === null ? "" : "●"),
      })),
    ],
  };
  box.dataset.events = String(tl.x.length);
  box.dataset.causes = String(tl.causes.length);
  return new uPlot(opts, [tl.x, ...tl.lanes] as uPlot.AlignedData, box);
}

function table(t: Table): HTMLTableElement {
  const el = h("table", { class: "tw-table", "data-testid": "resilience-causes", "data-rows": String(t.rows.length) });
  el.append(h("thead", {}, h("tr", {}, ...t.columns.map((c) => h("th", { scope: "col" }, c)))));
  el.append(h("tbody", {}, ...t.rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c))))));
  return el;
}

/** Draw a resilience result into `container`; null if the result has none of its parts. */
export function renderResilience(container: HTMLElement, result: unknown): { destroy(): void } | null {
  const curve = ettrCurve(result);
  const tl = failureTimeline(result);
  const causes = interruptionsTable(result);
  if (!curve && !tl && !causes) return null;
  const plots: uPlot[] = [];
  const panel = h("div", { class: "tw-resilience", "data-testid": "resilience-panel" });
  container.append(panel);
  if (curve) {
    const box = h("div", { class: "tw-chart", "data-testid": "resilience-ettr" });
    panel.append(h("h4", {}, "ETTR vs checkpoint interval"), box);
    plots.push(ettrChart(box, curve));
  }
  if (tl) {
    const box = h("div", { class: "tw-chart", "data-testid": "resilience-timeline" });
    const note = tl.truncated ? " (first events only)" : "";
    panel.append(h("h4", {}, `Failure timeline${note}`), box);
    plots.push(timelineChart(box, tl));
  }
  if (causes) panel.append(h("h4", {}, "Interruptions by cause"), table(causes));
  return { destroy: () => plots.forEach((p) => p.destroy()) };
}
