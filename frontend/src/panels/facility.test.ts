import { describe, expect, it } from "vitest";

import { applyLoopFrame, cduLoops, cduRows, loopRow, plantSeries, powerStages, sankeyLayout } from "./facility";

/** The parts of GET /api/facility/sites/<id>/plant/ these functions read. */
const SUMMARY = {
  it_kw: 90,
  power: [
    { key: "feed-0", kind: "feed", input_kw: 100, load_kw: 100 },
    { key: "ups-0", kind: "ups", input_kw: 100, load_kw: 95 },
    { key: "pdu-0", kind: "pdu", input_kw: 50, load_kw: 45 },
    { key: "pdu-1", kind: "pdu", input_kw: 45, load_kw: 45 },
  ],
  cooling: [
    { key: "cdu-0", kind: "cdu", load_kw: 60, usable_kw: 100, headroom_kw: 40, utilization: 0.6 },
    { key: "ct-0", kind: "cooling_tower", load_kw: 100, usable_kw: 300, headroom_kw: 200, utilization: 0.33 },
  ],
};

describe("powerStages", () => {
  it("sums each stage upstream first, its loss = input - load", () => {
    const stages = powerStages(SUMMARY);
    expect(stages.map((s) => [s.kind, s.count, s.input_kw, s.load_kw, s.loss_kw])).toEqual([
      ["feed", 1, 100, 100, 0],
      ["ups", 1, 100, 95, 5],
      ["pdu", 2, 95, 90, 5],
    ]);
    expect(powerStages({})).toEqual([]);
  });
});

describe("sankeyLayout", () => {
  it("conserves power: what leaves each node is what enters the next, all of it ends as heat", () => {
    const s = sankeyLayout(powerStages(SUMMARY), 500, 200);
    expect(s).not.toBeNull();
    if (!s) return;
    const into = (id: string): number => s.bands.filter((b) => b.to === id).reduce((a, b) => a + b.kw, 0);
    const out = (id: string): number => s.bands.filter((b) => b.from === id).reduce((a, b) => a + b.kw, 0);
    expect(out("feed")).toBeCloseTo(100);
    expect(into("ups")).toBeCloseTo(100);
    expect(out("ups")).toBeCloseTo(100); // 95 on + 5 lost
    expect(into("it")).toBeCloseTo(90);
    expect(into("heat")).toBeCloseTo(100); // IT 90 + losses 5 + 5
    expect(s.bands.filter((b) => b.loss && b.to !== "heat").map((b) => b.from)).toEqual(["ups", "pdu"]);
    // widths follow kW: the feed fills the height less the loss lane
    const feed = s.nodes.find((n) => n.id === "feed");
    expect(feed?.h).toBeCloseTo(100 * s.scale);
    expect(s.nodes.every((n) => n.x >= 0 && n.x + n.w <= 500 + 1e-9)).toBe(true);
  });

  it("draws nothing without a powered feed", () => {
    expect(sankeyLayout([])).toBeNull();
    expect(sankeyLayout(powerStages({ power: [{ kind: "feed", input_kw: 0, load_kw: 0 }] }))).toBeNull();
  });
});

describe("cduRows", () => {
  it("lists CDUs only, with headroom and use", () => {
    expect(cduRows(SUMMARY)).toEqual([["cdu-0", "60", "100", "40", "60 %"]]);
  });
});

describe("cduLoops and loopRow", () => {
  it("reads the snapshot's facility.cdus and marks measured figures", () => {
    const loops = cduLoops({
      cdus: [
        {
          key: "cdu-0",
          supply_c: 30.5,
          return_c: 40.5,
          flow_kg_s: 1.356,
          heat_w: 55000,
          load_fraction: 0.55,
          measured: ["supply_c", "heat_w"],
          leaks: 0,
        },
        { key: "cdu-1", supply_c: null, return_c: 41, flow_kg_s: "x", load_fraction: null, leaks: 2 },
      ],
    });
    expect(loops.map((c) => c.key)).toEqual(["cdu-0", "cdu-1"]);
    expect(loopRow(loops[0])).toEqual(["cdu-0", "30.5 •", "40.5", "10.0", "1.36", "55.0 •", "55 %", "dry"]);
    expect(loopRow(loops[1])).toEqual(["cdu-1", "—", "41.0", "—", "—", "—", "—", "LEAK (2)"]);
    expect(cduLoops(null)).toEqual([]);
    expect(cduLoops({ cdus: "no" })).toEqual([]);
  });

  it("moves the snapshot's loops with each frame's columns", () => {
    const snap = cduLoops({
      cdus: [
        { key: "cdu-0", supply_c: 30, return_c: 40, flow_kg_s: 1.2, heat_w: 50000, load_fraction: 0.5, measured: [] },
        {
          key: "cdu-1",
          supply_c: 31,
          return_c: 41,
          flow_kg_s: 1.3,
          heat_w: 52000,
          load_fraction: 0.52,
          measured: ["heat_w"],
          leaks: 0,
        },
      ],
    });
    const next = applyLoopFrame(snap, {
      cdu_loops: {
        supply_c: [30.2, 31.1],
        return_c: [42.5, null],
        flow_kg_s: [1.2, 0.6],
        heat_w: [61000, 53000],
        load_fraction: [0.61, 0.53],
      },
      cdu_measured: { "cdu-0": ["supply_c"] },
      cdu_leaks: { "cdu-1": 1 },
    });
    expect(next.map((c) => c.key)).toEqual(["cdu-0", "cdu-1"]);
    expect(loopRow(next[0])).toEqual(["cdu-0", "30.2 •", "42.5", "12.3", "1.20", "61.0", "61 %", "—"]);
    expect(loopRow(next[1])).toEqual(["cdu-1", "31.1", "—", "—", "0.60", "53.0", "53 %", "LEAK (1)"]);
    expect(snap[0].heat_w).toBe(50000); // the snapshot's rows are not changed in place
    // a frame of another layout (other length) or without loops leaves the rows as they were
    expect(
      applyLoopFrame(snap, {
        cdu_loops: { supply_c: [1], return_c: [1], flow_kg_s: [1], heat_w: [1], load_fraction: [1] },
      }),
    ).toBe(snap);
    expect(applyLoopFrame(snap, { pue: 1.1 })).toBe(snap);
    expect(applyLoopFrame(snap, null)).toBe(snap);
  });
});

describe("plantSeries", () => {
  it("turns minute rows into aligned series in kW, the supply averaged over CDUs", () => {
    const s = plantSeries([
      {
        minute: "2026-12-05T14:00:00Z",
        pue: 1.07,
        it_w: 4800,
        facility_w: 5136,
        cdus: [{ supply_c: 30 }, { supply_c: 32 }, { supply_c: null }],
      },
      { minute: "2026-12-05T14:01:00Z", pue: null, it_w: null, facility_w: 5000, cdus: [] },
      { minute: "not a time", pue: 9 },
    ]);
    expect(s.x).toEqual([Date.parse("2026-12-05T14:00:00Z") / 1000, Date.parse("2026-12-05T14:01:00Z") / 1000]);
    expect(s.pue).toEqual([1.07, null]);
    expect(s.it_kw).toEqual([4.8, null]);
    expect(s.facility_kw).toEqual([5.136, 5]);
    expect(s.supply_c).toEqual([31, null]);
    expect(plantSeries(undefined).x).toEqual([]);
  });
});
