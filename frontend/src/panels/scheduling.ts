/**
 * A `scheduling` run's result drawn per policy: the GPU allocation rate against the
 * arrived GPU demand (the FGD paper's figure: arrivals past 100 % of capacity) and
 * the allocation rate over simulated time (utilisation), one uPlot line per policy.
 * The policies' curves have points at different x, so they are put on one grid
 * (linear interpolation; a policy's curve ends where its own x ends).
 */
import type uPlot from "uplot";

import { renderChart } from "./scenariorender";
import type { ChartData, ChartSeries } from "./scenarioresult";

interface PolicyResult {
  policy: string;
  curve: Array<[number, number]>;
  timeline?: { t?: number[]; allocation_rate?: number[] };
}

function policiesOf(result: unknown): PolicyResult[] {
  if (typeof result !== "object" || result === null) return [];
  const list = (result as { policies?: unknown }).policies;
  return Array.isArray(list) ? (list as PolicyResult[]).filter((p) => p && Array.isArray(p.curve)) : [];
}

/** y at x on a polyline sorted by x (null outside it). */
export function interpolate(xs: readonly number[], ys: readonly number[], x: number): number | null {
  if (xs.length === 0 || x < xs[0] || x > xs[xs.length - 1]) return null;
  let lo = 0;
  let hi = xs.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) lo = mid;
    else hi = mid;
  }
  if (xs[hi] === xs[lo]) return ys[hi];
  const f = (x - xs[lo]) / (xs[hi] - xs[lo]);
  return ys[lo] + (ys[hi] - ys[lo]) * f;
}

/** Several polylines on one sorted, de-duplicated x grid. */
export function onOneGrid(lines: ReadonlyArray<{ label: string; x: number[]; y: number[] }>): {
  x: number[];
  series: ChartSeries[];
} {
  const x = [...new Set(lines.flatMap((l) => l.x))].sort((a, b) => a - b);
  const series = lines.map((l) => ({ label: l.label, y: x.map((v) => interpolate(l.x, l.y, v)) }));
  return { x, series };
}

/** Allocation rate (%) against arrived demand (% of capacity), one series per policy. */
export function allocationChart(result: unknown): ChartData | null {
  const policies = policiesOf(result);
  if (policies.length === 0) return null;
  const grid = onOneGrid(
    policies.map((p) => ({
      label: p.policy,
      x: p.curve.map(([a]) => a * 100),
      y: p.curve.map(([, r]) => r * 100),
    })),
  );
  return {
    ...grid,
    logX: false,
    logY: false,
    xKey: "arrived",
    yKey: "allocation",
    xLabel: "Arrived GPU demand (% of capacity)",
    yLabel: "GPU allocation rate (%)",
  };
}

/** Allocation rate (%) over simulated time (s), one series per policy. */
export function utilisationChart(result: unknown): ChartData | null {
  const policies = policiesOf(result).filter((p) => (p.timeline?.t?.length ?? 0) > 1);
  if (policies.length === 0) return null;
  const grid = onOneGrid(
    policies.map((p) => ({
      label: p.policy,
      x: p.timeline?.t ?? [],
      y: (p.timeline?.allocation_rate ?? []).map((r) => r * 100),
    })),
  );
  return {
    ...grid,
    logX: false,
    logY: false,
    xKey: "t",
    yKey: "allocation_rate",
    xLabel: "Simulated time (s)",
    yLabel: "Allocated cards (%)",
  };
}

/** Both charts into `container` (one box each); the plots, for the caller to destroy. */
export function renderScheduling(container: HTMLElement, result: unknown): uPlot[] {
  const plots: uPlot[] = [];
  for (const data of [allocationChart(result), utilisationChart(result)]) {
    if (!data) continue;
    const box = document.createElement("div");
    box.className = "scheduling-chart";
    box.dataset.testid = `scheduling-chart-${data.xKey}`;
    container.append(box);
    plots.push(renderChart(box, data));
  }
  container.dataset.series = String(policiesOf(result).length);
  return plots;
}
