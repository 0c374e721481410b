import { describe, expect, it } from "vitest";

import { alertTarget, mergeAlerts, normalise, severityCounts } from "./alertlist";
import type { AlertEvent, AlertPayload } from "./host";

function alert(id: number, started: string, extra: Partial<AlertPayload> = {}): AlertPayload {
  return {
    id,
    rule: "gpu_temp",
    severity: "warning",
    card: id * 10,
    rack: 7,
    message: `alert ${id}`,
    started,
    ended: null,
    ...extra,
  };
}

const T = (s: number) => new Date(Date.UTC(2025, 0, 1, 12, 0, s)).toISOString();

describe("normalise", () => {
  it("orders newest first, then by id, and drops ended alerts", () => {
    const list = normalise([alert(1, T(1)), alert(2, T(5)), alert(3, T(5)), alert(4, T(9), { ended: T(10) })]);
    expect(list.map((a) => a.id)).toEqual([3, 2, 1]);
  });
  it("caps the list keeping the newest", () => {
    const list = normalise([alert(1, T(1)), alert(2, T(2)), alert(3, T(3))], 2);
    expect(list.map((a) => a.id)).toEqual([3, 2]);
  });
});

describe("mergeAlerts", () => {
  const base = [alert(2, T(2)), alert(1, T(1))];

  it("adds opened alerts at the top", () => {
    const out = mergeAlerts(base, [{ event: "opened", alert: alert(3, T(3), { severity: "critical" }) }]);
    expect(out.map((a) => a.id)).toEqual([3, 2, 1]);
    expect(out[0].severity).toBe("critical");
  });
  it("removes closed alerts", () => {
    const out = mergeAlerts(base, [{ event: "closed", alert: alert(2, T(2), { ended: T(8) }) }]);
    expect(out.map((a) => a.id)).toEqual([1]);
  });
  it("updates acknowledged alerts in place", () => {
    const out = mergeAlerts(base, [{ event: "acknowledged", alert: alert(1, T(1), { acknowledged_by: "ops" }) }]);
    expect(out.map((a) => a.id)).toEqual([2, 1]);
    expect(out[1].acknowledged_by).toBe("ops");
  });
  it("applies events in order: opened then closed in one batch leaves nothing", () => {
    const events: AlertEvent[] = [
      { event: "opened", alert: alert(5, T(5)) },
      { event: "closed", alert: alert(5, T(5), { ended: T(6) }) },
    ];
    expect(mergeAlerts(base, events).map((a) => a.id)).toEqual([2, 1]);
  });
  it("does not duplicate an alert opened twice and ignores unknown events", () => {
    const out = mergeAlerts(base, [
      { event: "opened", alert: alert(2, T(2)) },
      { event: "whatever", alert: alert(9, T(9)) },
    ]);
    expect(out.map((a) => a.id)).toEqual([2, 1]);
  });
  it("keeps the cap after a storm", () => {
    const storm: AlertEvent[] = Array.from({ length: 500 }, (_, i) => ({
      event: "opened",
      alert: alert(100 + i, T(10 + (i % 40))),
    }));
    const out = mergeAlerts(base, storm, 50);
    expect(out).toHaveLength(50);
    for (let i = 1; i < out.length; i++) {
      expect(Date.parse(out[i - 1].started!) >= Date.parse(out[i].started!)).toBe(true);
    }
  });
  it("does not modify its input", () => {
    const copy = base.map((a) => ({ ...a }));
    mergeAlerts(base, [{ event: "closed", alert: alert(1, T(1)) }]);
    expect(base).toEqual(copy);
  });
});

describe("alertTarget and severityCounts", () => {
  it("prefers the card, then the rack", () => {
    expect(alertTarget(alert(1, T(1)))).toEqual({ kind: "card", id: 10 });
    expect(alertTarget(alert(1, T(1), { card: null }))).toEqual({ kind: "rack", id: 7 });
    expect(alertTarget(alert(1, T(1), { card: null, rack: null }))).toBeNull();
  });
  it("counts per severity", () => {
    expect(severityCounts([alert(1, T(1)), alert(2, T(1), { severity: "critical" }), alert(3, T(1))])).toEqual({
      warning: 2,
      critical: 1,
    });
  });
});
