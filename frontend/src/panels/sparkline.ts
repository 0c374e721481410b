/**
 * A small uPlot line chart of one metric's recent history (the card panel's
 * sparkline). Created once per panel, fed with setData on every refresh.
 */
import uPlot from "uplot";

export interface Sparkline {
  readonly el: HTMLElement;
  set(points: ReadonlyArray<readonly [number, number | null]>): void;
  destroy(): void;
}

export function createSparkline(container: HTMLElement, height = 64): Sparkline {
  const width = () => Math.max(120, Math.floor(container.clientWidth || 280));
  const plot = new uPlot(
    {
      width: width(),
      height,
      legend: { show: false },
      cursor: { show: false },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      axes: [{ show: false }, { show: false }],
      scales: { x: { time: true } },
      series: [{}, { stroke: "#58a6ff", width: 1.5, fill: "rgba(88, 166, 255, 0.15)", points: { show: false } }],
    },
    [[], []],
    container,
  );
  const observer =
    typeof ResizeObserver === "undefined"
      ? null
      : new ResizeObserver(() => {
          const w = width();
          if (w !== plot.width) plot.setSize({ width: w, height });
        });
  observer?.observe(container);
  return {
    el: container,
    set(points) {
      const xs = points.map((p) => p[0]);
      const ys = points.map<number | null>((p) => p[1]);
      plot.setData([xs, ys] as uPlot.AlignedData);
      container.dataset.points = String(points.length);
    },
    destroy() {
      observer?.disconnect();
      plot.destroy();
    },
  };
}
