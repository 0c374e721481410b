/**
 * Drawing the results of the training kinds (the data comes from training.ts):
 * the stacked step-time bar, the memory bar against the card's HBM, the Pareto
 * scatter (uPlot: step time against energy per step, one colour per card count)
 * and the best-configurations table whose rows have an "open this
 * configuration" button; the per-stage clocks of a pipeline (DVFS) as one bar per
 * stage with the energy each plan saves; the step by class of op with the exposed
 * communication per dimension, and BF16 against FP8 / FP4 on one scale. Bars are plain
 * elements sized in percent
 * (one bar needs no chart library); every element carries a data-testid.
 */
import uPlot from "uplot";

import { button, h } from "./dom";
import { formatNumber, formatSeconds } from "./format";
import {
  bestConfigs,
  bestTable,
  breakdownBar,
  dvfsFigure,
  memoryBar,
  opsBar,
  paretoScatter,
  precisionBars,
  rejectedRows,
  type Config,
  type StackedBar,
} from "./training";

const PART_COLOURS = ["#4c8dff", "#2ea043", "#d29922", "#da3633", "#a371f7", "#39c5cf", "#db61a2", "#8b949e"];

function colour(i: number): string {
  return PART_COLOURS[i % PART_COLOURS.length];
}

/** One horizontal stacked bar with its legend; `scale` = the length the bar's 100 % stands for. */
function stackedBar(bar: StackedBar, testid: string, unit: (v: number) => string, scale = bar.total): HTMLElement {
  const track = h("div", { class: "tw-stack", "data-testid": testid, "data-total": String(bar.total) });
  const legend = h("ul", { class: "tw-legend" });
  bar.segments.forEach((s, i) => {
    const width = scale > 0 ? (100 * s.value) / scale : 0;
    track.append(
      h("span", {
        class: "tw-stack-part",
        "data-part": s.key,
        title: `${s.label}: ${unit(s.value)} (${formatNumber(100 * s.share, 3)} %)`,
        style: `width:${Math.min(100, width).toFixed(3)}%;background:${colour(i)}`,
      }),
    );
    legend.append(
      h("li", {}, h("span", { class: "tw-swatch", style: `background:${colour(i)}` }), `${s.label} ${unit(s.value)}`),
    );
  });
  return h("div", { class: "tw-stack-box" }, track, legend);
}

/** The step-time breakdown of one configuration (a `training` result or a `best` entry). */
export function renderBreakdown(result: unknown): HTMLElement | null {
  const bar = breakdownBar(result);
  if (!bar) return null;
  return h(
    "section",
    { class: "tw-training-part" },
    h("h4", {}, `Step time ${formatSeconds(bar.total)}`),
    stackedBar(bar, "training-breakdown", (v) => formatSeconds(v)),
  );
}

/** The step by class of op, the bubble and the exposed communication per dimension. */
export function renderOps(result: unknown): HTMLElement | null {
  const bar = opsBar(result);
  if (!bar) return null;
  return h(
    "section",
    { class: "tw-training-part" },
    h("h4", {}, `Where the step goes, by op (${formatSeconds(bar.total)})`),
    stackedBar(bar, "training-ops", (v) => formatSeconds(v)),
  );
}

/** BF16 against FP8 / FP4 for the same layout: one bar each, on the slowest one's scale. */
export function renderPrecisions(result: unknown): HTMLElement | null {
  const bars = precisionBars(result);
  if (!bars.length) return null;
  const scale = Math.max(...bars.map((b) => b.total));
  const box = h(
    "section",
    { class: "tw-training-part", "data-testid": "training-precisions" },
    h("h4", {}, "The same layout at each precision"),
  );
  for (const bar of bars) {
    const gain = bar.speedup !== null ? ` — ${formatNumber(bar.speedup, 3)}× BF16` : "";
    const own = bar.current ? " (this run)" : "";
    box.append(
      h(
        "p",
        { class: "tw-muted" },
        `${bar.precision.toUpperCase()}${own}: ${formatSeconds(bar.total)}${gain}${bar.fits ? "" : ", does not fit"}`,
      ),
      stackedBar(bar, `training-precision-${bar.precision}`, (v) => formatSeconds(v), scale),
    );
  }
  return box;
}

/** Memory per card against HBM: the bar's full width is max(HBM, total), HBM marked. */
export function renderMemory(result: unknown): HTMLElement | null {
  const bar = memoryBar(result);
  if (!bar) return null;
  const scale = Math.max(bar.total, bar.hbm ?? 0);
  const box = stackedBar(bar, "training-memory", (v) => `${formatNumber(v, 3)} GiB`, scale);
  const track = box.querySelector<HTMLElement>(".tw-stack");
  if (track && bar.hbm !== null && scale > 0) {
    track.append(
      h("span", {
        class: "tw-stack-limit",
        "data-testid": "training-hbm",
        title: `HBM ${formatNumber(bar.hbm, 3)} GiB`,
        style: `left:${((100 * bar.hbm) / scale).toFixed(3)}%`,
      }),
    );
    track.dataset.fits = String(bar.fits);
  }
  const head = `Memory per card ${formatNumber(bar.total, 3)} GiB of ${formatNumber(bar.hbm, 3)} GiB HBM`;
  return h(
    "section",
    { class: `tw-training-part${bar.fits ? "" : " tw-over"}` },
    h("h4", {}, bar.fits ? head : `${head} — does not fit`),
    box,
  );
}

/**
 * Per-stage clocks (DVFS): for each plan, the energy the cards save and the slowdown
 * it costs, and one bar per stage as tall as its clock (the base clock: full height).
 */
export function renderDvfs(result: unknown): HTMLElement | null {
  const figure = dvfsFigure(result);
  if (!figure) return null;
  const plans = figure.plans.map((plan) => {
    const bars = h("div", { class: "tw-clocks", "data-testid": `training-dvfs-${plan.key}` });
    plan.clocks.forEach((clock, i) => {
      bars.append(
        h("span", {
          class: "tw-clock",
          "data-clock": String(clock),
          title: `stage ${i + 1}: ${formatNumber(100 * clock, 3)} % of the base clock`,
          style: `height:${Math.max(2, Math.min(100, 100 * clock)).toFixed(1)}%`,
        }),
      );
    });
    return h(
      "div",
      { class: "tw-clock-plan" },
      h(
        "p",
        { "data-testid": `training-dvfs-${plan.key}-saved` },
        `${plan.label}: cards' energy −${formatNumber(100 * plan.saved, 3)} %, ` +
          `step +${formatNumber(100 * plan.slowdown, 3)} %`,
      ),
      bars,
    );
  });
  return h(
    "section",
    { class: "tw-training-part", "data-testid": "training-dvfs" },
    h("h4", {}, `Per-stage clocks (DVFS), ${figure.stages} pipeline stages`),
    ...plans,
  );
}

/** The Pareto scatter of a search (uPlot, points only); null when there is nothing to plot. */
export function renderPareto(container: HTMLElement, result: unknown): uPlot | null {
  const data = paretoScatter(result);
  if (!data) return null;
  const axis = {
    stroke: "#98a2b3",
    grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
    ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
  };
  const opts: uPlot.Options = {
    width: Math.max(260, Math.floor(container.clientWidth || 420)),
    height: 220,
    scales: { x: { time: false } },
    axes: [
      { ...axis, label: "Step time (s)", values: (_u, vals) => vals.map((v) => formatNumber(v)) },
      { ...axis, label: "Energy per step (J)", size: 60, values: (_u, vals) => vals.map((v) => formatNumber(v)) },
    ],
    series: [
      { label: "step time", value: (_u, v) => (v === null ? "—" : formatSeconds(v)) },
      ...data.series.map((s, i) => ({
        label: s.label,
        stroke: colour(i),
        fill: colour(i),
        paths: () => null,
        points: { show: true, size: 7, fill: colour(i) },
        value: (_u: uPlot, v: number | null) => (v === null ? "—" : `${formatNumber(v)} J`),
      })),
    ],
  };
  container.dataset.points = String(data.points);
  container.dataset.series = String(data.series.length);
  return new uPlot(opts, [data.x, ...data.series.map((s) => s.y)] as uPlot.AlignedData, container);
}

/** The ranked table; each row's button calls `onOpen` with its configuration. */
export function renderBest(list: Config[], onOpen: ((config: Config) => void) | null): HTMLTableElement {
  const table = bestTable(list);
  const t = h("table", { class: "tw-table", "data-testid": "training-best", "data-rows": String(list.length) });
  t.append(
    h(
      "thead",
      {},
      h("tr", {}, ...table.columns.map((c) => h("th", { scope: "col" }, c)), onOpen ? h("th", {}, "") : null),
    ),
  );
  const body = h("tbody");
  table.rows.forEach((row, i) => {
    const tr = h("tr", { "data-testid": "training-best-row", "data-rank": row[0] }, ...row.map((c) => h("td", {}, c)));
    if (onOpen) {
      tr.append(
        h(
          "td",
          {},
          button(
            "open",
            {
              class: "tw-btn",
              "data-testid": "training-open",
              title: "Open this configuration as a training run",
            },
            () => onOpen(list[i]),
          ),
        ),
      );
    }
    body.append(tr);
  });
  t.append(body);
  return t;
}

/** What was rejected and why (a `training_search` result). */
export function renderRejected(result: unknown): HTMLElement | null {
  const rows = rejectedRows(result);
  if (!rows.length) return null;
  return h(
    "section",
    { class: "tw-training-part" },
    h("h4", {}, "Rejected configurations"),
    h(
      "ul",
      { class: "tw-rejected", "data-testid": "training-rejected" },
      ...rows.map(([reason, n]) => h("li", {}, `${formatNumber(n, 6)} · ${reason}`)),
    ),
  );
}

export interface TrainingView {
  destroy(): void;
}

/**
 * A training or training_search result into `box` (replacing what it held).
 * `onOpen` (search results): what "open this configuration" does.
 */
export function renderTrainingResult(
  box: HTMLElement,
  kind: string,
  result: unknown,
  onOpen: ((config: Config) => void) | null,
): TrainingView {
  box.replaceChildren();
  box.dataset.kind = kind;
  let plot: uPlot | null = null;
  if (kind === "training") {
    for (const part of [
      renderBreakdown(result),
      renderOps(result),
      renderPrecisions(result),
      renderMemory(result),
      renderDvfs(result),
    ])
      if (part) box.append(part);
  } else {
    const best = bestConfigs(result);
    const chart = h("div", { class: "tw-chart", "data-testid": "training-pareto" });
    box.append(h("h4", {}, "Pareto front: step time against energy"), chart);
    plot = renderPareto(chart, result);
    if (!plot) chart.append(h("p", { class: "tw-muted" }, "No configuration fits."));
    box.append(h("h4", {}, "Best configurations"), renderBest(best, onOpen));
    if (best.length) {
      for (const part of [renderBreakdown(best[0].raw), renderMemory(best[0].raw)]) if (part) box.append(part);
    }
    const rejected = renderRejected(result);
    if (rejected) box.append(rejected);
  }
  return {
    destroy(): void {
      plot?.destroy();
      plot = null;
      box.replaceChildren();
    },
  };
}
