/**
 * Drawing a scenario run's result: the table (every kind) and, when the kind
 * has a chart hint, a uPlot chart (a collective's busbw against message size,
 * log x). What to draw comes from the pure model in scenarioresult.ts.
 */
import uPlot from "uplot";

import { h } from "./dom";
import { formatBytes, formatNumber } from "./format";
import { renderFacilityWhatIf } from "./facilitywhatif";
import { renderResilience } from "./resilience";
import { renderWhatIf } from "./whatif";
import type { ChartData, Table } from "./scenarioresult";

/** Kinds whose result has a panel of its own (drawn instead of the generic chart). */
const KIND_PANELS: Record<string, (container: HTMLElement, result: unknown) => { destroy(): void } | null> = {
  resilience: renderResilience,
  facility: renderFacilityWhatIf,
  whatif: renderWhatIf,
};

/** The kind's own result panel in `container`, or null when it has none (or nothing to show). */
export function renderKindResult(kind: string, container: HTMLElement, result: unknown): { destroy(): void } | null {
  const panel = KIND_PANELS[kind];
  return panel ? panel(container, result) : null;
}

const SERIES_COLOURS = ["#4c8dff", "#2ea043", "#d29922", "#da3633", "#a371f7", "#39c5cf", "#db61a2", "#8b949e"];

/** The result table (data-x on each row: the chart's x value, when there is one). */
export function renderTable(table: Table): HTMLTableElement {
  const t = h("table", {
    class: "tw-table",
    "data-testid": "scenario-result-table",
    "data-rows": String(table.rows.length),
  });
  t.append(h("thead", {}, h("tr", {}, ...table.columns.map((c) => h("th", { scope: "col" }, c)))));
  const body = h("tbody");
  table.rows.forEach((row, i) => {
    const tr = h("tr", {}, ...row.map((c) => h("td", {}, c)));
    if (table.keys) tr.dataset.x = String(table.keys[i]);
    body.append(tr);
  });
  t.append(body);
  return t;
}

/** The chart of `data` in `container` (sized to it), first series bold, the others dashed. */
export function renderChart(container: HTMLElement, data: ChartData): uPlot {
  const bytes = data.xKey.endsWith("_bytes");
  const axis = {
    stroke: "#98a2b3",
    grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
    ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
  };
  const opts: uPlot.Options = {
    width: Math.max(260, Math.floor(container.clientWidth || 420)),
    height: 240,
    scales: {
      x: { time: false, distr: data.logX ? 3 : 1, log: bytes ? 2 : 10 },
      y: { distr: data.logY ? 3 : 1, log: 10 },
    },
    axes: [
      {
        ...axis,
        label: data.xLabel,
        values: (_u, vals) => vals.map((v) => (v === null ? "" : bytes ? formatBytes(v) : formatNumber(v))),
      },
      {
        ...axis,
        label: data.yLabel,
        size: 60,
        values: (_u, vals) => vals.map((v) => (v === null ? "" : formatNumber(v))),
      },
    ],
    series: [
      { label: data.xLabel, value: (_u, v) => (v === null ? "—" : bytes ? formatBytes(v) : formatNumber(v)) },
      ...data.series.map((s, i) => ({
        label: s.label,
        stroke: SERIES_COLOURS[i % SERIES_COLOURS.length],
        width: i === 0 ? 2.5 : 1.25,
        dash: i === 0 ? undefined : [5, 4],
        points: { show: true, size: i === 0 ? 5 : 3 },
        value: (_u: uPlot, v: number | null) => (v === null ? "—" : formatNumber(v)),
      })),
    ],
  };
  container.dataset.series = String(data.series.length);
  container.dataset.points = String(data.x.length);
  return new uPlot(opts, [data.x, ...data.series.map((s) => s.y)] as uPlot.AlignedData, container);
}
