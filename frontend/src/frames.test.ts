import { describe, expect, it } from "vitest";

import { ViewFrames, decodeInto, indexMap, sameView, type FrameMessage, type SnapshotMessage } from "./frames";

const SUB = { view: "supernode" as const, id: 3, metric: "power_w" };

function snapshot(over: Partial<SnapshotMessage> = {}): SnapshotMessage {
  return {
    type: "snapshot",
    view: "supernode",
    id: 3,
    metric: "power_w",
    seq: 10,
    ts: 1000.5,
    layout: "L1",
    keys: [30, 10, 20, 99],
    values: [300, null, 200.25, 5],
    health: [1, 0, 3, 1],
    unit: "W",
    aggregate: "card",
    ...over,
  };
}

function frame(over: Partial<FrameMessage> = {}): FrameMessage {
  return {
    type: "frame",
    view: "supernode",
    id: 3,
    metric: "power_w",
    seq: 11,
    ts: 1001,
    layout: "L1",
    values: [310, 110, null, 6],
    health: [1, 1, 4, 2],
    ...over,
  };
}

describe("indexMap / decodeInto", () => {
  it("maps message positions to instances, -1 for keys not drawn", () => {
    const m = indexMap(
      [30, 10, 77],
      new Map([
        [10, 0],
        [20, 1],
        [30, 2],
      ]),
    );
    expect(Array.from(m)).toEqual([2, 0, -1]);
  });
  it("writes null as NaN and skips unmapped positions", () => {
    const out = new Float64Array([1, 1, 1]);
    decodeInto([5, null, 9], new Int32Array([2, 0, -1]), out);
    expect(out[2]).toBe(5);
    expect(Number.isNaN(out[0])).toBe(true);
    expect(out[1]).toBe(1);
  });
});

describe("ViewFrames", () => {
  it("decodes a snapshot into instance order (the scene's keys)", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    expect(v.apply(snapshot())).toBe(true);
    expect(Number.isNaN(v.values[0])).toBe(true); // card 10: null
    expect(v.values[1]).toBe(200.25); // exact, not float32-rounded
    expect(v.values[2]).toBe(300);
    expect(v.valueOf(10)).toBeNull();
    expect(v.valueOf(30)).toBe(300);
    expect(v.valueOf(99)).toBeNull(); // not drawn
    expect(v.valueOf(20, true)).toBe(3);
    expect(v.seq).toBe(10);
    expect(v.unit).toBe("W");
  });
  it("applies frames in the snapshot's key order", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    v.apply(snapshot());
    expect(v.apply(frame())).toBe(true);
    expect(Array.from(v.values.slice(0, 2))).toEqual([110, Number.NaN]);
    expect(v.values[2]).toBe(310);
    expect(v.valueOf(20)).toBeNull();
    expect(v.valueOf(20, true)).toBe(4);
    expect(v.applied).toBe(2);
  });
  it("ignores stale and repeated frames", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    v.apply(snapshot());
    v.apply(frame({ seq: 12, values: [1, 2, 3, 4] }));
    expect(v.apply(frame({ seq: 11, values: [9, 9, 9, 9] }))).toBe(false);
    expect(v.apply(frame({ seq: 12, values: [8, 8, 8, 8] }))).toBe(false);
    expect(v.valueOf(30)).toBe(1);
    expect(v.seq).toBe(12);
  });
  it("ignores frames before a snapshot, of another layout, or of another view", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    expect(v.apply(frame())).toBe(false);
    v.apply(snapshot());
    expect(v.apply(frame({ layout: "L2" }))).toBe(false);
    expect(v.apply(frame({ id: 4 }))).toBe(false);
    expect(v.apply(frame({ metric: "gpu_util" }))).toBe(false);
    expect(v.apply(frame({ view: "rack" }))).toBe(false);
    expect(v.valueOf(30)).toBe(300);
  });
  it("takes a new layout's snapshot and remaps", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    v.apply(snapshot());
    expect(v.apply(snapshot({ layout: "L2", seq: 5, keys: [10, 20, 30], values: [1, 2, 3] }))).toBe(true);
    expect([v.valueOf(10), v.valueOf(20), v.valueOf(30)]).toEqual([1, 2, 3]);
    expect(v.apply(frame({ layout: "L2", seq: 6, values: [4, 5, 6] }))).toBe(true);
    expect(v.valueOf(30)).toBe(6);
  });
  it("ignores a late snapshot of the same layout, accepts a resubscription's", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    v.apply(snapshot({ seq: 10 }));
    v.apply(frame({ seq: 12 }));
    expect(v.apply(snapshot({ seq: 9 }))).toBe(false);
    expect(v.apply(snapshot({ seq: 12, values: [7, 7, 7, 7] }))).toBe(true);
    expect(v.valueOf(30)).toBe(7);
  });
  it("forgets everything when following another subscription", () => {
    const v = new ViewFrames([10, 20, 30]);
    v.follow(SUB);
    v.apply(snapshot());
    v.follow({ ...SUB, metric: "gpu_util" });
    expect(v.valueOf(30)).toBeNull();
    expect(v.apply(frame({ metric: "gpu_util" }))).toBe(false); // no snapshot yet
    expect(v.apply(snapshot())).toBe(false); // the old metric's snapshot
  });
  it("keeps per-rack budgets from a cluster snapshot", () => {
    const v = new ViewFrames([1, 2, 3]);
    v.follow({ view: "cluster", id: null, metric: "power_w" });
    v.apply({
      type: "snapshot",
      view: "cluster",
      id: null,
      metric: "power_w",
      seq: 1,
      ts: null,
      layout: "L",
      keys: [1, 2],
      values: [39000, null],
      budget_w: [40000, 40000],
    } as SnapshotMessage);
    expect(Array.from(v.budget.slice(0, 2))).toEqual([40000, 40000]);
    expect(Number.isNaN(v.budget[2])).toBe(true);
    expect(v.valueOf(1)).toBe(39000);
  });
  it("matches views with a null id", () => {
    expect(
      sameView({ view: "cluster", id: null, metric: "power_w" }, { view: "cluster", id: null, metric: "power_w" }),
    ).toBe(true);
    expect(sameView({ view: "rack", id: 2, metric: "power_w" }, { view: "rack", id: 3, metric: "power_w" })).toBe(
      false,
    );
  });
  it("decodes a 26k-rack frame quickly", () => {
    const keys = Array.from({ length: 26_624 }, (_, i) => i + 1);
    const v = new ViewFrames(keys);
    v.follow({ view: "cluster", id: null, metric: "power_w" });
    v.apply({
      type: "snapshot",
      view: "cluster",
      id: null,
      metric: "power_w",
      seq: 1,
      ts: null,
      layout: "L",
      keys,
      values: keys.map((k) => (k % 7 ? 30000 : null)),
    } as SnapshotMessage);
    const values = keys.map((k) => k * 1.5);
    const t0 = performance.now();
    v.apply({ type: "frame", view: "cluster", id: null, metric: "power_w", seq: 2, ts: null, layout: "L", values });
    expect(performance.now() - t0).toBeLessThan(20);
    expect(v.valueOf(26_624)).toBe(26_624 * 1.5);
  });
});
