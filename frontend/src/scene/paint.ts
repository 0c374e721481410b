/**
 * Colouring the shown view: the palette of the current metric (its scale
 * recompiled only when it must change), the racks' budgets for "power /
 * budget" on the floor, and the legend that explains the colours.
 */
import type { ClusterAllocations } from "../api";
import {
  DIVERGING,
  LOAD,
  autoDomain,
  categoriesScale,
  compile,
  cssGradient,
  legendOf,
  scaleFor,
  type MetricLike,
  type Palette,
} from "../colour";
import { JOB_RGB, cardCategories, categoryValues, type JobColouring } from "../panels/jobs";
import type { ViewFrames } from "../frames";
import { plantScale } from "../plant";
import { FloorView } from "./floor";
import type { AnyView } from "./views";

export class Painter {
  /** The palette last painted with (null before the first paint). */
  palette: Palette | null = null;
  /** Per-rack budgets of the floor (from the floor, then from the live snapshots). */
  private budgets: Float64Array | null = null;
  private view: AnyView | null = null;
  private metricKey = "";

  constructor(private readonly legendEl: HTMLElement) {}

  /** A new view is shown: the floor's racks bring their budgets. */
  install(view: AnyView): void {
    this.view = view;
    this.budgets = view instanceof FloorView ? Float64Array.from(view.floor.racks.budget_w) : null;
  }

  /** A cluster snapshot carries the racks' current budgets: use those. */
  snapshot(frames: ViewFrames): void {
    if (frames.budget.some((b) => b === b)) this.budgets = frames.budget;
  }

  /** Recolour `view` from the live values of `metric` (recompiling the scale when it must change). */
  paint(view: AnyView, frames: ViewFrames, metric: MetricLike, rescale: boolean): void {
    this.view = view;
    this.metricKey = metric.key;
    const values = metric.key === "health" ? frames.health : frames.values;
    let palette = this.palette;
    if (rescale || !palette || palette.scale.metric !== metric.key) {
      const scale = plantScale(metric, view.kind) ?? scaleFor(metric, view.kind);
      if (scale.kind === "sequential" && scale.auto) scale.domain = autoDomain(values) ?? scale.domain;
      palette = compile(scale);
      this.palette = palette;
      this.renderLegend();
    } else if (palette.scale.kind === "sequential" && palette.scale.auto) {
      // Grow (never shrink) an auto domain between snapshots, so colours stay comparable.
      const [lo, hi] = autoDomain(values) ?? palette.scale.domain;
      const [clo, chi] = palette.scale.domain;
      if (hi > chi || lo < clo) {
        const scale = { ...palette.scale, domain: [Math.min(lo, clo), Math.max(hi, chi)] as [number, number] };
        palette = compile(scale);
        this.palette = palette;
        this.renderLegend();
      }
    }
    const budgets =
      palette.scale.kind === "sequential" && palette.scale.ratio ? (this.budgets ?? undefined) : undefined;
    view.recolour(palette, values, budgets);
  }

  /** Colour a card view by job or tenant (free cards in the no-data grey). */
  paintJobs(view: AnyView, metric: MetricLike, alloc: ClusterAllocations | null, highlight: number | null): void {
    this.view = view;
    this.metricKey = metric.key;
    const empty = { card: [], job: [], jobs: [] };
    const cats = cardCategories(alloc ?? empty, metric.key as JobColouring, highlight);
    const palette = compile(categoriesScale(metric, cats.names, JOB_RGB));
    this.palette = palette;
    this.renderLegend();
    view.recolour(palette, categoryValues(view.keys, cats));
  }

  /** Colour each instance by a share (0..1, e.g. a rack's allocated cards in a scheduling
   *  playback): 0–100 % on the load gradient, instances without a share in the no-data grey. */
  paintShares(view: AnyView, shares: ReadonlyMap<number, number>, label: string): void {
    this.view = view;
    this.metricKey = "playback";
    const palette = compile({
      kind: "sequential",
      metric: "playback",
      label,
      unit: "%",
      domain: [0, 100],
      stops: LOAD,
      ratio: false,
      auto: false,
    });
    this.palette = palette;
    this.renderLegend();
    view.recolour(palette, shareValues(view.keys, shares));
  }

  /** Colour each instance by a signed difference (a what-if's peak rack kW) on the diverging
   *  scale −span … +span (0 in grey); instances without a value in the no-data grey. */
  paintDifference(view: AnyView, values: ReadonlyMap<number, number>, label: string, span: number): void {
    this.view = view;
    this.metricKey = "difference";
    const palette = compile({
      kind: "sequential",
      metric: "difference",
      label,
      unit: "kW",
      domain: [-span, span],
      stops: DIVERGING,
      ratio: false,
      auto: false,
    });
    this.palette = palette;
    this.renderLegend();
    view.recolour(
      palette,
      Float64Array.from(view.keys, (k) => values.get(k) ?? Number.NaN),
    );
  }

  /** The colour instance `key` of `view` is painted, "#rrggbb" (the test hook's colourOf). */
  colourOf(view: AnyView | null, key: number): string | null {
    const i = view?.instanceOf.get(key);
    if (!view || i === undefined || !this.palette) return null;
    return this.palette.hex[view.codes[i]] ?? null;
  }

  /** Draw the legend of the current palette (title, gradient with ticks, swatches). */
  renderLegend(): void {
    const legendEl = this.legendEl;
    const palette = this.palette;
    if (!palette) return;
    const view = this.view;
    const legend = legendOf(palette, view instanceof FloorView && view.fixed?.some((c) => c >= 0));
    const parts: HTMLElement[] = [];
    const title = document.createElement("div");
    title.className = "legend-title";
    title.textContent = legend.title;
    parts.push(title);
    if (legend.gradient.length) {
      const bar = document.createElement("div");
      bar.className = "legend-bar";
      bar.style.background = cssGradient(legend);
      const ticks = document.createElement("div");
      ticks.className = "legend-ticks";
      for (const [offset, text] of legend.ticks) {
        const t = document.createElement("span");
        t.textContent = text;
        t.style.left = `${offset * 100}%`;
        ticks.append(t);
      }
      parts.push(bar, ticks);
    }
    const list = document.createElement("ul");
    list.className = "legend-swatches";
    for (const s of legend.swatches) {
      const li = document.createElement("li");
      const sw = document.createElement("i");
      sw.style.background = s.colour;
      li.append(sw, document.createTextNode(s.label));
      list.append(li);
    }
    parts.push(list);
    legendEl.replaceChildren(...parts);
    legendEl.dataset.metric = this.metricKey;
  }
}

/** Percent per instance of `keys` from `shares` (key → 0..1); NaN (no data) where absent. */
export function shareValues(keys: readonly number[], shares: ReadonlyMap<number, number>): Float64Array {
  return Float64Array.from(keys, (k) => {
    const v = shares.get(k);
    return v === undefined ? Number.NaN : v * 100;
  });
}
