import { describe, expect, it } from "vitest";

import { alignSeries, fixedPointLine, ganttLayout, rackLimits, rackLimitText, whatifCharts } from "./whatif";

/** The parts of a what-if result these functions read, as the kind returns them. */
const result = {
  baseline: { series: { t_s: [0, 3600, 7200], utilisation: [0.5, 0.8, 0.6], power_kw: [10, 20, 15] } },
  perturbed: { series: { t_s: [0, 1800, 7200], utilisation: [0.5, 0.3, 0.7], power_kw: [10, 5, 16] } },
  jobs: {
    rows: [
      // ran before the fork, failed once, completes later
      {
        job: 7,
        name: "llm",
        baseline_start_s: -600,
        start_s: -600,
        baseline_completion_s: 3000,
        completion_s: 5000,
        restarts: 1,
        cancelled: false,
      },
      // queued, never starts in the what if
      {
        job: 9,
        name: "",
        baseline_start_s: 1000,
        start_s: null,
        baseline_completion_s: 2000,
        completion_s: null,
        restarts: 0,
        cancelled: false,
      },
      // not complete by the horizon in the what if
      {
        job: 11,
        baseline_start_s: 100,
        start_s: 200,
        baseline_completion_s: 6000,
        completion_s: null,
        restarts: 0,
        cancelled: true,
      },
    ],
  },
};

describe("ganttLayout", () => {
  it("clips a job started before the fork at 0 and marks its restarts", () => {
    const g = ganttLayout(result);
    expect(g?.end).toBe(7200);
    const [b, p] = g!.rows[0].bars;
    expect(b).toMatchObject({ case: "baseline", x0: 0, x1: 3000, before: true, open: false, restarts: 0 });
    expect(p).toMatchObject({ case: "perturbed", x0: 0, x1: 5000, restarts: 1 });
  });

  it("draws no bar for a case that never started and runs an open bar to the end", () => {
    const g = ganttLayout(result)!;
    expect(g.rows[1].bars.map((b) => b.case)).toEqual(["baseline"]);
    const open = g.rows[2].bars[1];
    expect(open).toMatchObject({ x0: 200, x1: 7200, open: true, cancelled: true });
  });

  it("runs the axis to the horizon when the result carries it", () => {
    expect(ganttLayout({ ...result, horizon_h: 6 })?.end).toBe(6 * 3600);
  });

  it("keeps the table's order, up to the limit, and answers null without jobs", () => {
    expect(ganttLayout(result, 2)!.rows.map((r) => r.job)).toEqual(["7", "9"]);
    expect(ganttLayout({})).toBeNull();
    expect(ganttLayout({ jobs: { rows: [] } })).toBeNull();
  });
});

describe("alignSeries", () => {
  it("puts both step series on the union of their times, holding the last value", () => {
    const a = alignSeries([0, 10], [1, 2], [5, 10, 20], [7, 8, 9]);
    expect(a.x).toEqual([0, 5, 10, 20]);
    expect(a.a).toEqual([1, 1, 2, 2]);
    expect(a.b).toEqual([null, 7, 8, 9]);
  });
});

describe("whatifCharts", () => {
  it("overlays both cases in hours and adds PUE only with the facility part", () => {
    const charts = whatifCharts(result);
    expect(charts.map((c) => c.id)).toEqual(["utilisation", "power_kw"]);
    expect(charts[0].x).toEqual([0, 0.5, 1, 2]);
    expect(charts[0].baseline).toEqual([0.5, 0.5, 0.8, 0.6]);
    expect(charts[0].perturbed).toEqual([0.5, 0.3, 0.3, 0.7]);
    const facility = {
      baseline: { series: { t_s: [0, 3600], pue: [1.1, 1.1] } },
      perturbed: { series: { t_s: [0, 3600], pue: [1.1, 1.3] } },
    };
    const queue = {
      baseline: { series: { t_s: [0, 3600], waiting_jobs: [2, 1], queued_cards: [48, 24] } },
      perturbed: { series: { t_s: [0, 600], waiting_jobs: [2, 3], queued_cards: [48, 72] } },
    };
    const queues = whatifCharts(queue);
    expect(queues.map((c) => c.id)).toEqual(["waiting_jobs", "queued_cards"]);
    expect(queues[1].x).toEqual([0, 600 / 3600, 1]);
    expect(queues[1].baseline).toEqual([48, 48, 24]);
    expect(queues[1].perturbed).toEqual([48, 72, 72]);
    const withPlant = whatifCharts({ ...result, facility });
    expect(withPlant.map((c) => c.id)).toEqual(["utilisation", "power_kw", "pue"]);
    expect(withPlant[2].perturbed).toEqual([1.1, 1.3]);
    expect(whatifCharts(null)).toEqual([]);
  });
});

describe("the plant's figures in the comparison view", () => {
  const facility = {
    baseline: {
      fixed_point: { rounds: 1, converged: true, residual_kw: null, tolerance_kw: 0.1 },
      racks: { ids: [11, 12, 13, 14], time_to_limit_s: [null, null, 900, null], trips: [0, 0, 0, 0] },
    },
    perturbed: {
      fixed_point: { rounds: 3, converged: false, residual_kw: 0.25, tolerance_kw: 0.1 },
      racks: { ids: [11, 12, 13, 14], time_to_limit_s: [300, 90, null, null], trips: [0, 2, 0, 1] },
    },
  };

  it("lists the racks at their limit or tripped, soonest in the what if first", () => {
    const rows = rackLimits({ facility });
    expect(rows).toEqual([
      { rack: 12, perturbed: 90, baseline: null, trips: 2, baselineTrips: 0 },
      { rack: 11, perturbed: 300, baseline: null, trips: 0, baselineTrips: 0 },
      // not at its limit in the what if: by the baseline's time, then tripped-only racks
      { rack: 13, perturbed: null, baseline: 900, trips: 0, baselineTrips: 0 },
      { rack: 14, perturbed: null, baseline: null, trips: 1, baselineTrips: 0 },
    ]);
    expect(rackLimitText(12, 90, 2)).toBe("rack 12: 90 s, 2 trips");
    expect(rackLimitText(14, null, 1)).toBe("rack 14: not at its limit, 1 trip");
  });

  it("says the fixed point of each case in one line", () => {
    expect(fixedPointLine({ facility })).toBe(
      "Plant ↔ jobs fixed point: baseline 1 round, converged, residual —; " +
        "what if 3 rounds, not converged, residual 0.25 kW",
    );
  });

  it("has nothing to say without a plant", () => {
    expect(rackLimits({})).toBeNull();
    expect(fixedPointLine({ facility: null })).toBeNull();
    expect(rackLimits({ facility: { baseline: {}, perturbed: {} } })).toBeNull();
    // a plant that limited nothing: an empty list, not null (the view says so)
    const cool = { perturbed: { racks: { ids: [1], time_to_limit_s: [null], trips: [0] } } };
    expect(rackLimits({ facility: cool })).toEqual([]);
  });
});
