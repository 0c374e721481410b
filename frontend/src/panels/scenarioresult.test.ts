import { describe, expect, it } from "vitest";

import { axisLabel, cell, chartData, flattenResult, resultTable } from "./scenarioresult";
import KINDS from "./testdata/kinds.json";

/** A collective result as the kind returns it (4×4 torus, sizes given unsorted; points/best left out). */
const COLLECTIVE = {
  op: "allreduce",
  algorithm: "auto",
  ranks: 16,
  sizes: [
    {
      size_bytes: 1048576,
      algorithm: "torus",
      time_s: 1.97208e-5,
      algbw_gbps: 425.37,
      busbw_gbps: 797.57,
      algorithms: {
        ring: { time_s: 1.98e-5, algbw_gbps: 423.4, busbw_gbps: 793.9 },
        torus: { time_s: 1.97e-5, algbw_gbps: 425.4, busbw_gbps: 797.57 },
      },
    },
    {
      size_bytes: 1024,
      algorithm: "torus",
      time_s: 7.92e-8,
      algbw_gbps: 103.43,
      busbw_gbps: 193.94,
      algorithms: {
        ring: { time_s: 1.69e-7, algbw_gbps: 48.4, busbw_gbps: 90.78 },
        torus: { time_s: 7.92e-8, algbw_gbps: 103.4, busbw_gbps: 193.94 },
      },
    },
    {
      size_bytes: 65536,
      algorithm: "ring",
      time_s: 1.2888e-6,
      algbw_gbps: 406.8,
      busbw_gbps: 762.76,
      algorithms: { ring: { time_s: 1.29e-6, algbw_gbps: 406.8, busbw_gbps: 762.76 } },
    },
  ],
  unsupported: { hierarchical: "needs ranks in more than one supernode" },
  notes: [],
};

const hint = KINDS.find((k) => k.name === "collective")!.chart!;

describe("chartData", () => {
  it("plots the hinted series sorted by x, with one curve per algorithm", () => {
    const data = chartData(COLLECTIVE, hint)!;
    expect(data.x).toEqual([1024, 65536, 1048576]);
    expect(data.logX).toBe(true);
    expect(data.series.map((s) => s.label)).toEqual(["best", "ring", "torus"]);
    expect(data.series[0].y).toEqual([193.94, 762.76, 797.57]);
    expect(data.series[1].y).toEqual([90.78, 762.76, 793.9]);
    expect(data.series[2].y).toEqual([193.94, null, 797.57]); // torus has no point at 64 KiB
    expect(data.xLabel).toBe("Message size (bytes)");
    expect(data.yLabel).toBe("Bus bandwidth (Gb/s)");
  });
  it("finds the rows without a series name, and drops x ≤ 0 on a log axis", () => {
    const data = chartData(
      {
        rows: [
          { n: 0, v: 1 },
          { n: 4, v: 2 },
          { n: 2, v: 3 },
        ],
      },
      { x: "n", y: "v", log_x: true },
    )!;
    expect(data.x).toEqual([2, 4]);
    expect(data.series).toEqual([{ label: "v", y: [3, 2] }]);
  });
  it("returns null without a hint or matching rows", () => {
    expect(chartData(COLLECTIVE, null)).toBeNull();
    expect(chartData({ other: [1, 2] }, hint)).toBeNull();
    expect(chartData("text", hint)).toBeNull();
  });
});

describe("resultTable", () => {
  it("tabulates a collective per message size, sorted", () => {
    const t = resultTable("collective", COLLECTIVE);
    expect(t.columns).toEqual(["message size", "algorithm", "time", "algbw (Gb/s)", "busbw (Gb/s)"]);
    expect(t.keys).toEqual([1024, 65536, 1048576]);
    expect(t.rows[0]).toEqual(["1 KiB", "torus", "79.2 ns", "103.4", "193.9"]);
    expect(t.rows[1]).toEqual(["64 KiB", "ring", "1.29 µs", "406.8", "762.8"]);
    expect(t.rows[2]).toEqual(["1 MiB", "torus", "19.7 µs", "425.4", "797.6"]);
  });
  it("prefers the API's rows for other kinds", () => {
    const t = resultTable("topology", { avg_hops: 2.13 }, [
      ["avg_hops", "2.1333 (= 32/15)"],
      ["diameter_hops", 4],
    ]);
    expect(t).toEqual({
      columns: ["quantity", "value"],
      rows: [
        ["avg_hops", "2.1333 (= 32/15)"],
        ["diameter_hops", "4"],
      ],
    });
  });
  it("flattens a result without rows", () => {
    const t = resultTable("route", {
      reachable: true,
      hops: 3,
      latency_ns: { average: 22, max: 50 },
      labels: ["a", "b"],
    });
    expect(t.rows).toEqual([
      ["reachable", "yes"],
      ["hops", "3"],
      ["latency_ns.average", "22"],
      ["latency_ns.max", "50"],
      ["labels", "a, b"],
    ]);
  });
  it("never throws on odd results", () => {
    expect(resultTable("x", null).rows).toEqual([["—"]]);
    expect(flattenResult({ nested: { deep: { x: 1 } } })).toEqual([["nested.deep.x", "1"]]);
    expect(flattenResult({ nested: { deep: { x: 1 } }, gone: null }, new Set(), 2)).toEqual([
      ["nested.deep", '{"x":1}'],
      ["gone", "—"],
    ]);
    expect(flattenResult({ a: { b: null, c: 2 }, cluster: { id: 1 } }, new Set(["cluster"]))).toEqual([["a.c", "2"]]);
  });
});

describe("cells and labels", () => {
  it("formats cells", () => {
    expect(cell(1234.5678)).toBe("1,235");
    expect(cell(2.13333)).toBe("2.133");
    expect(cell(false)).toBe("no");
    expect(cell(Array.from({ length: 20 }, (_, i) => i))).toBe("0, 1, 2, 3, 4, 5, …, 15, 16, 17, 18, 19");
    expect(cell([{ a: 1 }, { a: 2 }])).toBe("2 items");
  });
  it("labels axes from keys", () => {
    expect(axisLabel("size_bytes")).toBe("size (bytes)");
    expect(axisLabel("busbw_gbps")).toBe("busbw (Gb/s)");
    expect(axisLabel("latency_ns")).toBe("latency (ns)");
  });
});

describe("the what-if comparison table", () => {
  it("puts each total of both cases side by side with the difference, then the jobs", () => {
    const totals = (energy: number, lost: number) => ({ energy_mwh: energy, lost_card_hours: lost });
    const t = resultTable(
      "whatif",
      {
        baseline: { totals: totals(10, 0) },
        perturbed: { totals: totals(9.5, 3.2) },
        jobs: {
          rows: [
            { job: 7, baseline_completion_s: 3600, completion_s: 5200, delay_s: 1600 },
            { job: 8, baseline_completion_s: 100, completion_s: null, delay_s: null },
          ],
        },
      },
      [["ignored", "the server's rows lose to the comparison"]],
    );
    expect(t.columns).toEqual(["quantity", "baseline", "what if", "difference"]);
    expect(t.rows).toEqual([
      ["energy (MWh)", "10", "9.5", "-0.5"],
      ["lost card-hours", "0", "3.2", "+3.2"],
      ["job 7 completes (s)", "3,600", "5,200", "+1,600"],
      ["job 8 completes (s)", "100", "—", "—"],
    ]);
  });

  it("shows the peak feed and rack power (kW) and what the plant did to the racks", () => {
    const totals = (feed: number | null, out: number) => ({
      peak_rack_kw: 30,
      peak_feed_kw: feed,
      plant_throttled_racks: 0,
      plant_out_racks: out,
    });
    const t = resultTable("whatif", {
      baseline: { totals: totals(120.5, 0) },
      perturbed: { totals: totals(110, 2) },
    });
    expect(t.rows).toEqual([
      ["peak rack (kW)", "30", "30", "0"],
      ["peak feed (kW)", "120.5", "110", "-10.5"],
      ["racks throttled by the plant", "0", "0", "0"],
      ["racks taken out by the plant", "0", "2", "+2"],
    ]);
  });

  it("shows the racks an overloaded power element unpowered and the jobs it stopped", () => {
    const totals = (racks: number, jobs: number) => ({ feed_out_racks: racks, feed_jobs_hit: jobs });
    const t = resultTable("whatif", {
      baseline: { totals: totals(0, 0) },
      perturbed: { totals: totals(2, 1) },
    });
    expect(t.rows).toEqual([
      ["racks unpowered by the power chain", "0", "2", "+2"],
      ["jobs stopped by the power chain", "0", "1", "+1"],
    ]);
  });
});
