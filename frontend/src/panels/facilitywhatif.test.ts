import { describe, expect, it } from "vitest";

import { facilityCharts, facilitySummary, racksAtRisk } from "./facilitywhatif";

/** The parts of a facility result these functions read, as the kind returns them. */
const result = {
  t_s: [1800, 3600, 5400],
  series: {
    max_card_c: [60, 70, 85],
    max_rack_return_c: [40, 45, 50],
    max_cdu_supply_c: [30, 31, 32],
    facility_supply_c: [28, 28, 28],
    facility_w: [110_000, 120_000, 115_000],
    it_w: [100_000, 100_000, 95_000],
    demand_w: [100_000, 100_000, 100_000],
    mechanical_w: [5_000, 6_000, 7_000],
    losses_w: [5_000, 5_000, 5_000],
    pue: [1.1, 1.2, null],
  },
  events: [
    { at_s: 60, kind: "cdu_trip" },
    { at_s: 3000, kind: "hot_day" },
  ],
  first_at_limit: [
    { rack: "r7", time_to_limit_s: 3090 },
    { rack: "r2", time_to_limit_s: 1000 },
  ],
  racks_at_limit: 5,
  racks_total: 107,
  energy: { mean_pue: 1.15, facility_kwh: 57.5, it_kwh: 49, it_lost_kwh: 1, throughput_lost_fraction: 0.01 },
  capping: { ticks_capped: 12, max_racks_capped: 3 },
};

describe("facilityCharts", () => {
  it("puts hours on x and scales watts to kW", () => {
    const charts = facilityCharts(result);
    expect(charts.map((c) => c.id)).toEqual(["temperatures", "power", "pue"]);
    expect(charts[0].x).toEqual([0.5, 1, 1.5]);
    const power = charts[1];
    expect(power.series[0]).toEqual({ label: "facility", y: [110, 120, 115] });
    expect(power.series).toHaveLength(5);
    expect(charts[2].series[0].y).toEqual([1.1, 1.2, null]);
  });

  it("drops series of the wrong length and answers nothing without series", () => {
    const charts = facilityCharts({ ...result, series: { ...result.series, pue: [1.1] } });
    expect(charts.map((c) => c.id)).toEqual(["temperatures", "power"]);
    expect(facilityCharts({})).toEqual([]);
    expect(facilityCharts({ t_s: [], series: {} })).toEqual([]);
  });
});

describe("racksAtRisk", () => {
  it("counts the time left from the last event before the limit", () => {
    const t = racksAtRisk(result);
    expect(t?.rows[0]).toEqual(["r7", "3,090", "90"]); // hot day at 3,000 s: you have 90 s
    expect(t?.rows[1]).toEqual(["r2", "1,000", "940"]); // CDU trip at 60 s
    expect(t?.rows[2][0]).toBe("… 3 more");
  });

  it("says none when no rack reaches its limit", () => {
    const t = racksAtRisk({ ...result, first_at_limit: [], racks_at_limit: 0 });
    expect(t?.rows).toEqual([["none of 107 racks", "—", "—"]]);
    expect(racksAtRisk({})).toBeNull();
  });
});

describe("facilitySummary", () => {
  it("lists energy and capping", () => {
    const rows: Record<string, string> = Object.fromEntries(
      (facilitySummary(result)?.rows ?? []).map((r) => [r[0], r[1]]),
    );
    expect(rows["mean PUE"]).toBe("1.15");
    expect(rows["steps capped"]).toBe("12");
    expect(facilitySummary({})).toBeNull();
  });
});
