import { describe, expect, it } from "vitest";

import {
  alertTarget,
  applyGroupEvents,
  buildGroups,
  groupKey,
  groupPlace,
  groupSeverityCounts,
  mergeAlerts,
  normalise,
  severityCounts,
  type ServerAlertGroup,
} from "./alertlist";
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

describe("alert groups", () => {
  const drop = (id: number, card: number, rack = 7, s = id): AlertPayload =>
    alert(id, T(s), { rule: "util_drop", card, rack, supernode: 3, message: `card ${card}: utilization fell` });

  it("makes a rack of 40 cards dropping utilisation one group of 40", () => {
    const alerts = Array.from({ length: 40 }, (_, i) => drop(i + 1, 100 + i, 7, i % 50));
    const groups = buildGroups([], alerts);
    expect(groups).toHaveLength(1);
    expect(groups[0]).toMatchObject({ rule: "util_drop", scope: "rack", place: 7, count: 40 });
    expect(groups[0].members[0].id).toBe(40); // newest first
    expect(groupPlace(groups[0])).toBe("rack #7");
  });

  it("keeps racks, rules and severities apart: most severe, largest, newest first", () => {
    const groups = buildGroups(
      [],
      [
        drop(1, 1, 7),
        drop(2, 2, 7),
        drop(3, 3, 8),
        alert(4, T(4), { rule: "xid", severity: "critical", card: 4, rack: 8 }),
        alert(5, T(5), { rule: "cluster_silent", severity: "critical", card: null, rack: null }),
      ],
    );
    expect(groups.map((g) => [g.rule, g.place, g.count])).toEqual([
      ["cluster_silent", null, 1], // critical, newer than the XID
      ["xid", 8, 1],
      ["util_drop", 7, 2],
      ["util_drop", 8, 1],
    ]);
    expect(groups[0].scope).toBe("cluster");
    expect(groupSeverityCounts(groups)).toEqual({ critical: 2, warning: 3 });
  });

  it("takes the counts of every open alert from the server and the names of the racks", () => {
    const server: ServerAlertGroup[] = [
      {
        rule: "util_drop",
        severity: "warning",
        scope: "rack",
        rack: 7,
        rack_name: "r7",
        supernode: 3,
        supernode_name: "sn3",
        count: 1000,
        newest: T(30),
        message: "card 9: utilization fell",
      },
    ];
    const [g] = buildGroups(server, [drop(1, 1), drop(2, 2)]);
    expect(g.count).toBe(1000);
    expect(g.members.map((a) => a.id)).toEqual([2, 1]);
    expect(groupPlace(g)).toBe("rack r7");
    expect(groupKey(drop(1, 1), "supernode")).toBe("util_drop|warning|3");
  });

  it("counts opened and closed alerts as they come, and drops an empty group", () => {
    let groups = buildGroups([], [drop(1, 1)]);
    groups = applyGroupEvents(groups, [
      { event: "opened", alert: drop(2, 2) },
      { event: "opened", alert: drop(2, 2) }, // the same again: no double count
      { event: "opened", alert: drop(3, 3, 9) },
    ]);
    expect(groups.map((g) => [g.place, g.count])).toEqual([
      [7, 2],
      [9, 1],
    ]);
    groups = applyGroupEvents(groups, [
      { event: "acknowledged", alert: drop(1, 1, 7) },
      { event: "closed", alert: { ...drop(3, 3, 9), ended: T(40) } },
    ]);
    expect(groups.map((g) => [g.place, g.count])).toEqual([[7, 2]]);
    groups = applyGroupEvents(groups, [
      { event: "closed", alert: drop(1, 1) },
      { event: "closed", alert: drop(2, 2) },
    ]);
    expect(groups).toEqual([]);
  });

  it("uncounts a closed alert of the group that was not held locally", () => {
    const server: ServerAlertGroup[] = [
      {
        rule: "util_drop",
        severity: "warning",
        scope: "rack",
        rack: 7,
        rack_name: "r7",
        supernode: 3,
        supernode_name: "sn3",
        count: 50,
        newest: T(30),
        message: "",
      },
    ];
    const groups = applyGroupEvents(buildGroups(server, []), [{ event: "closed", alert: drop(999, 5) }]);
    expect(groups[0].count).toBe(49);
  });

  it("does not modify its input", () => {
    const groups = buildGroups([], [drop(1, 1)]);
    const copy = JSON.stringify(groups);
    applyGroupEvents(groups, [{ event: "opened", alert: drop(2, 2) }]);
    expect(JSON.stringify(groups)).toBe(copy);
  });
});
