import { describe, expect, it } from "vitest";

import { ettrCurve, failureTimeline, interruptionsTable } from "./resilience";

/** The parts of a resilience result these functions read, as the kind returns them. */
const RESULT = {
  days: 2,
  checkpoint_interval_min: 30,
  optimal_checkpoint_interval_min: { young: 12.5, daly: 13.1, simulated: 15, simulated_ettr: 0.93 },
  ettr_curve: [
    { interval_min: 60, ettr: 0.9, ettr_min: 0.88, ettr_max: 0.91, ettr_daly: 0.905 },
    { interval_min: 7.5, ettr: 0.91, ettr_min: 0.9, ettr_max: 0.92, ettr_daly: 0.915 },
    { interval_min: 15, ettr: 0.93, ettr_min: 0.92, ettr_max: 0.94, ettr_daly: 0.925 },
    { interval_min: 0, ettr: 0.1, ettr_daly: 0.1 },
  ],
  interruptions: {
    total: 4,
    by_class: { card: 3, network: 1 },
    by_cause: { "Faulty GPU": 2, "GPU HBM3 Memory": 1, "Network Switch/Cable": 1 },
  },
  timeline: [
    { t_s: 90000, class: "card", cause: "Faulty GPU", action: "restart" },
    { t_s: 3600, class: "network", cause: "Network Switch/Cable", action: "restart" },
    { t_s: 43200, class: "card", cause: "Faulty GPU", action: "restart" },
    { t_s: 86400, class: "card", cause: "GPU HBM3 Memory", action: "restart" },
  ],
  timeline_truncated: false,
};

describe("ettrCurve", () => {
  it("sorts the intervals, drops non-positive ones and keeps Daly alongside", () => {
    const c = ettrCurve(RESULT);
    expect(c?.x).toEqual([7.5, 15, 60]);
    expect(c?.ettr).toEqual([0.91, 0.93, 0.9]);
    expect(c?.daly).toEqual([0.915, 0.925, 0.905]);
  });
  it("marks Young, Daly, the simulated optimum and the run's own interval", () => {
    const marks = ettrCurve(RESULT)?.marks.map((m) => [m.label, m.interval_min]);
    expect(marks).toEqual([
      ["Young", 12.5],
      ["Daly", 13.1],
      ["simulated optimum", 15],
      ["this run", 30],
    ]);
  });
  it("is null without a curve", () => {
    expect(ettrCurve({})).toBeNull();
    expect(ettrCurve({ ettr_curve: [] })).toBeNull();
    expect(ettrCurve(null)).toBeNull();
  });
});

describe("failureTimeline", () => {
  it("puts each event on its cause's lane, most frequent cause first, in days", () => {
    const t = failureTimeline(RESULT);
    expect(t?.causes).toEqual(["Faulty GPU", "GPU HBM3 Memory", "Network Switch/Cable"]);
    expect(t?.counts).toEqual([2, 1, 1]);
    expect(t?.x).toEqual([3600 / 86400, 0.5, 1, 90000 / 86400]);
    expect(t?.lanes).toEqual([
      [null, 0, null, 0],
      [null, null, 1, null],
      [2, null, null, null],
    ]);
    expect(t?.days).toBe(2);
    expect(t?.truncated).toBe(false);
  });
  it("every event lands on exactly one lane", () => {
    const t = failureTimeline(RESULT);
    const placed = t?.x.map((_x, i) => t.lanes.filter((lane) => lane[i] !== null).length);
    expect(placed).toEqual([1, 1, 1, 1]);
  });
  it("falls back to the class when an event has no cause, and is null without events", () => {
    const t = failureTimeline({ timeline: [{ t_s: 10, class: "host" }] });
    expect(t?.causes).toEqual(["host"]);
    expect(failureTimeline({ timeline: [] })).toBeNull();
  });
});

describe("interruptionsTable", () => {
  it("lists causes by count with their share and a total", () => {
    const t = interruptionsTable(RESULT);
    expect(t?.columns).toEqual(["cause", "interruptions", "share"]);
    expect(t?.rows).toEqual([
      ["Faulty GPU", "2", "50 %"],
      ["GPU HBM3 Memory", "1", "25 %"],
      ["Network Switch/Cable", "1", "25 %"],
      ["total", "4", "100 %"],
    ]);
  });
  it("is null without interruptions", () => {
    expect(interruptionsTable({})).toBeNull();
  });
});
