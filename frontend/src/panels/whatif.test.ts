import { describe, expect, it } from "vitest";

import { alignSeries, ganttLayout, whatifCharts } from "./whatif";

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
