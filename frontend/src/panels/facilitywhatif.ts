/**
 * The facility kind's result panel: the plant over time as uPlot series
 * (temperatures, power, PUE) with the events marked, and the racks that reach
 * their thermal limit first ("you have 90 s" after the event that did it).
 *
 * The data functions are pure (vitest-covered): they read the result the kind
 * returns (`t_s`, `series`, `events`, `first_at_limit`, `energy`, `capping`).
 * `renderFacilityWhatIf` draws them; scenariorender.ts calls it for a facility run.
 */
import uPlot from "uplot";

import { h } from "./dom";
import { formatNumber } from "./format";
import type { Table } from "./scenarioresult";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** One chart: shared x (hours), one or more named series of the result. */
export interface FacilityChart {
  id: string;
  title: string;
  yLabel: string;
  x: number[];
  series: { label: string; y: (number | null)[] }[];
}

/** The charts drawn for a facility result: [key of result.series, label, scale]. */
const CHARTS: { id: string; title: string; yLabel: string; keys: [string, string, number][] }[] = [
  {
    id: "temperatures",
    title: "Temperatures",
    yLabel: "°C",
    keys: [
      ["max_card_c", "hottest card", 1],
      ["max_rack_return_c", "hottest rack return", 1],
      ["max_cdu_supply_c", "hottest CDU supply", 1],
      ["facility_supply_c", "facility supply", 1],
    ],
  },
  {
    id: "power",
    title: "Power",
    yLabel: "kW",
    keys: [
      ["facility_w", "facility", 1e-3],
      ["it_w", "IT delivered", 1e-3],
      ["demand_w", "IT demand", 1e-3],
      ["mechanical_w", "cooling", 1e-3],
      ["losses_w", "conversion losses", 1e-3],
    ],
  },
  { id: "pue", title: "PUE", yLabel: "PUE", keys: [["pue", "PUE", 1]] },
];

/** The time-series charts of a facility result (hours on x), or [] without series. */
export function facilityCharts(result: unknown): FacilityChart[] {
  if (!isObj(result) || !Array.isArray(result.t_s) || !isObj(result.series)) return [];
  const x = result.t_s.map((t) => (num(t) ?? 0) / 3600);
  if (!x.length) return [];
  const series = result.series;
  return CHARTS.map((c) => ({
    id: c.id,
    title: c.title,
    yLabel: c.yLabel,
    x,
    series: c.keys
      .filter(([key]) => Array.isArray(series[key]) && (series[key] as unknown[]).length === x.length)
      .map(([key, label, scale]) => ({
        label,
        y: (series[key] as unknown[]).map((v) => {
          const n = num(v);
          return n === null ? null : n * scale;
        }),
      })),
  })).filter((c) => c.series.length > 0);
}

/** The racks that reached their thermal limit, soonest first, with the time left after
 * the last event before it ("you have N s"). */
export function racksAtRisk(result: unknown): Table | null {
  if (!isObj(result) || !Array.isArray(result.first_at_limit)) return null;
  const events = Array.isArray(result.events) ? result.events.filter(isObj) : [];
  const starts = events
    .map((e) => num(e.at_s))
    .filter((t): t is number => t !== null)
    .sort((a, b) => a - b);
  const rows = result.first_at_limit.filter(isObj).flatMap((r) => {
    const t = num(r.time_to_limit_s);
    if (t === null) return [];
    const before = starts.filter((s) => s <= t);
    const since = before.length ? t - before[before.length - 1] : t;
    return [[typeof r.rack === "string" ? r.rack : "?", formatNumber(t), formatNumber(since)]];
  });
  const total = num(result.racks_total);
  const at = num(result.racks_at_limit) ?? rows.length;
  if (!rows.length) {
    return { columns: ["rack", "at limit (s)", "you have (s)"], rows: [[`none of ${total ?? "?"} racks`, "—", "—"]] };
  }
  if (at > rows.length) rows.push([`… ${at - rows.length} more`, "", ""]);
  return { columns: ["rack", "at limit (s)", "you have (s)"], rows };
}

/** Energy and capping, as label/value rows. */
export function facilitySummary(result: unknown): Table | null {
  if (!isObj(result) || !isObj(result.energy)) return null;
  const e = result.energy;
  const c = isObj(result.capping) ? result.capping : {};
  const f = (v: unknown): string => {
    const n = num(v);
    return n === null ? "—" : formatNumber(n);
  };
  return {
    columns: ["", ""],
    rows: [
      ["mean PUE", f(e.mean_pue)],
      ["facility energy (kWh)", f(e.facility_kwh)],
      ["IT energy (kWh)", f(e.it_kwh)],
      ["IT energy lost (kWh)", f(e.it_lost_kwh)],
      ["throughput lost", f(e.throughput_lost_fraction)],
      ["steps capped", f(c.ticks_capped)],
      ["most racks capped", f(c.max_racks_capped)],
    ],
  };
}

const COLOURS = ["#da3633", "#d29922", "#4c8dff", "#2ea043", "#a371f7"];

function chart(box: HTMLElement, c: FacilityChart): uPlot {
  const axis = {
    stroke: "#98a2b3",
    grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
    ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
  };
  box.dataset.series = String(c.series.length);
  box.dataset.points = String(c.x.length);
  return new uPlot(
    {
      width: Math.max(260, Math.floor(box.clientWidth || 420)),
      height: 180,
      scales: { x: { time: false } },
      axes: [
        { ...axis, label: "hours" },
        { ...axis, label: c.yLabel, size: 56 },
      ],
      series: [
        { label: "h" },
        ...c.series.map((s, i) => ({
          label: s.label,
          stroke: COLOURS[i % COLOURS.length],
          width: i === 0 ? 2 : 1.25,
        })),
      ],
    },
    [c.x, ...c.series.map((s) => s.y)] as uPlot.AlignedData,
    box,
  );
}

function table(t: Table, testid: string): HTMLTableElement {
  const el = h("table", { class: "tw-table", "data-testid": testid });
  if (t.columns.some((c) => c)) el.append(h("thead", {}, h("tr", {}, ...t.columns.map((c) => h("th", {}, c)))));
  el.append(h("tbody", {}, ...t.rows.map((r) => h("tr", {}, ...r.map((v) => h("td", {}, v))))));
  return el;
}

/** The facility result panel in `container`, or null when the result has nothing to draw. */
export function renderFacilityWhatIf(container: HTMLElement, result: unknown): { destroy(): void } | null {
  const charts = facilityCharts(result);
  const risk = racksAtRisk(result);
  const summary = facilitySummary(result);
  if (!charts.length && !risk && !summary) return null;
  const panel = h("div", { class: "tw-facility-whatif", "data-testid": "facility-whatif" });
  container.append(panel);
  const plots: uPlot[] = [];
  for (const c of charts) {
    const box = h("div", { class: "tw-chart", "data-testid": `facility-whatif-${c.id}` });
    panel.append(h("h4", {}, c.title), box);
    plots.push(chart(box, c));
  }
  if (risk) panel.append(h("h4", {}, "Racks at their thermal limit"), table(risk, "facility-whatif-at-risk"));
  if (summary) panel.append(h("h4", {}, "Energy and capping"), table(summary, "facility-whatif-summary"));
  return { destroy: () => plots.forEach((p) => p.destroy()) };
}
