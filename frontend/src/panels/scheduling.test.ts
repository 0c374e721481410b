import { describe, expect, it } from "vitest";

import { allocationChart, interpolate, onOneGrid, utilisationChart } from "./scheduling";

describe("scheduling charts", () => {
  it("interpolates linearly and not outside the line", () => {
    expect(interpolate([0, 1, 2], [0, 10, 30], 1.5)).toBe(20);
    expect(interpolate([0, 1], [5, 7], 0)).toBe(5);
    expect(interpolate([0, 1], [5, 7], 1.2)).toBeNull();
    expect(interpolate([], [], 0)).toBeNull();
  });

  it("puts the policies' curves on one grid", () => {
    const grid = onOneGrid([
      { label: "fgd", x: [0, 2], y: [0, 20] },
      { label: "random", x: [0, 1], y: [0, 5] },
    ]);
    expect(grid.x).toEqual([0, 1, 2]);
    expect(grid.series).toEqual([
      { label: "fgd", y: [0, 10, 20] },
      { label: "random", y: [0, 5, null] },
    ]);
  });

  it("draws allocation against arrived demand in percent, one series per policy", () => {
    const result = {
      policies: [
        {
          policy: "fgd",
          curve: [
            [0.5, 0.5],
            [1.3, 0.95],
          ],
        },
        {
          policy: "best-fit",
          curve: [
            [0.5, 0.5],
            [1.3, 0.9],
          ],
        },
      ],
    };
    const chart = allocationChart(result);
    expect(chart?.x).toEqual([50, 130]);
    expect(chart?.series.map((s) => s.label)).toEqual(["fgd", "best-fit"]);
    expect(chart?.series[1].y).toEqual([50, 90]);
    expect(allocationChart({})).toBeNull();
  });

  it("draws utilisation over time only where there is a timeline", () => {
    const result = {
      policies: [
        { policy: "fgd", curve: [], timeline: { t: [0, 10, 20], allocation_rate: [0, 0.5, 0.25] } },
        { policy: "random", curve: [], timeline: { t: [0], allocation_rate: [0] } },
      ],
    };
    const chart = utilisationChart(result);
    expect(chart?.series.map((s) => s.label)).toEqual(["fgd"]);
    expect(chart?.series[0].y).toEqual([0, 50, 25]);
  });
});
