import { describe, expect, it } from "vitest";

import {
  CARD_PITCH,
  FLOOR_ASPECT,
  GROUP_GAP,
  RACK,
  bestColumns,
  floorLayout,
  gridPositions,
  hasCoordinates,
  isWrap,
  rackPositions,
  torusPositions,
  wrapStubs,
} from "./layout";

/** The demo's floor: 8 supernodes of 13 racks in rows 0–7, two network racks in row 8. */
function demoFloor(supernodes = 8, perSn = 13) {
  const racks = { id: [] as number[], row: [] as number[], slot: [] as number[], supernode: [] as (number | null)[] };
  let id = 1;
  for (let s = 0; s < supernodes; s++) {
    for (let r = 0; r < perSn; r++) {
      racks.id.push(id++);
      racks.row.push(s);
      racks.slot.push(r);
      racks.supernode.push(100 + s);
    }
  }
  for (let j = 0; j < 2; j++) {
    racks.id.push(id++);
    racks.row.push(supernodes + Math.floor(j / 32));
    racks.slot.push(j % 32);
    racks.supernode.push(null);
  }
  const sn = {
    id: Array.from({ length: supernodes }, (_, s) => 100 + s),
    index: Array.from({ length: supernodes }, (_, s) => s),
    name: Array.from({ length: supernodes }, (_, s) => `sn${s}`),
  };
  return { racks, sn };
}

function overlaps(a: { x0: number; x1: number; z0: number; z1: number }, b: typeof a): boolean {
  return a.x0 < b.x1 && b.x0 < a.x1 && a.z0 < b.z1 && b.z0 < a.z1;
}

describe("floorLayout", () => {
  it("is deterministic", () => {
    const { racks, sn } = demoFloor();
    const a = floorLayout(racks, sn);
    const b = floorLayout(racks, sn);
    expect(Array.from(a.x)).toEqual(Array.from(b.x));
    expect(Array.from(a.z)).toEqual(Array.from(b.z));
  });
  it("does not depend on the order the racks come in", () => {
    const { racks, sn } = demoFloor();
    const order = racks.id.map((_, i) => i).reverse();
    const shuffled = {
      id: order.map((i) => racks.id[i]),
      row: order.map((i) => racks.row[i]),
      slot: order.map((i) => racks.slot[i]),
      supernode: order.map((i) => racks.supernode[i]),
    };
    const a = floorLayout(racks, sn);
    const b = floorLayout(shuffled, sn);
    order.forEach((i, k) => {
      expect(b.x[k]).toBe(a.x[i]);
      expect(b.z[k]).toBe(a.z[i]);
    });
  });
  it("groups racks by supernode, groups apart by at least the gap", () => {
    const { racks, sn } = demoFloor();
    const f = floorLayout(racks, sn);
    expect(f.groups.map((g) => g.supernode)).toEqual([100, 101, 102, 103, 104, 105, 106, 107, null]);
    expect(f.groups[8].name).toBe("network");
    for (let a = 0; a < f.groups.length; a++) {
      for (let b = a + 1; b < f.groups.length; b++) {
        const ga = f.groups[a];
        const gb = f.groups[b];
        expect(overlaps(ga, gb)).toBe(false);
        const gapX = Math.max(gb.x0 - ga.x1, ga.x0 - gb.x1);
        const gapZ = Math.max(gb.z0 - ga.z1, ga.z0 - gb.z1);
        expect(Math.max(gapX, gapZ)).toBeGreaterThanOrEqual(GROUP_GAP - 1e-4);
      }
    }
    // Every rack lies inside its group and no two racks share a spot.
    const seen = new Set<string>();
    for (let i = 0; i < racks.id.length; i++) {
      const g = f.groups[f.group[i]];
      expect(f.x[i] - RACK.w / 2).toBeGreaterThanOrEqual(g.x0 - 1e-4);
      expect(f.x[i] + RACK.w / 2).toBeLessThanOrEqual(g.x1 + 1e-4);
      expect(f.z[i] - RACK.d / 2).toBeGreaterThanOrEqual(g.z0 - 1e-4);
      expect(f.z[i] + RACK.d / 2).toBeLessThanOrEqual(g.z1 + 1e-4);
      const key = `${f.x[i]},${f.z[i]}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
    }
  });
  it("keeps a supernode's racks in slot order along X", () => {
    const { racks, sn } = demoFloor();
    const f = floorLayout(racks, sn);
    for (let i = 1; i < 13; i++) {
      expect(f.x[i]).toBeGreaterThan(f.x[i - 1]);
      expect(f.z[i]).toBe(f.z[0]);
    }
  });
  it("centres the floor on the origin", () => {
    const { racks, sn } = demoFloor();
    const f = floorLayout(racks, sn);
    expect(f.x0 + f.x1).toBeCloseTo(0, 4);
    expect(f.z0 + f.z1).toBeCloseTo(0, 4);
  });
  it("folds 2,048 supernodes into a landscape field, not a strip", () => {
    const { racks, sn } = demoFloor(2048, 13);
    const t0 = performance.now();
    const f = floorLayout(racks, sn);
    expect(performance.now() - t0).toBeLessThan(500);
    const w = f.x1 - f.x0;
    const d = f.z1 - f.z0;
    expect(w / d).toBeGreaterThan(FLOOR_ASPECT / 1.6);
    expect(w / d).toBeLessThan(FLOOR_ASPECT * 1.6);
    expect(f.groups.length).toBe(2049);
  });
  it("handles an empty floor", () => {
    const f = floorLayout({ id: [], row: [], slot: [], supernode: [] }, { id: [], index: [], name: [] });
    expect(f.groups).toEqual([]);
    expect([f.x0, f.x1, f.z0, f.z1]).toEqual([0, 0, 0, 0]);
  });
  it("picks the column count closest to the aspect", () => {
    expect(bestColumns(1, 10, 10)).toBe(1);
    expect(bestColumns(8, 15.6, 5)).toBe(2);
  });
});

const cube = (n: number) => {
  const x: number[] = [],
    y: number[] = [],
    z: number[] = [],
    server: number[] = [],
    slot: number[] = [];
  for (let i = 0; i < n * n * n; i++) {
    x.push(i % n);
    y.push(Math.floor(i / n) % n);
    z.push(Math.floor(i / (n * n)));
    server.push(Math.floor(i / 8));
    slot.push(i % 8);
  }
  return { x, y, z, server, slot };
};

describe("torus positions", () => {
  it("places card (x, y, z) on a centred lattice, (0,0,0) at front-left-bottom", () => {
    const c = cube(8);
    const p = torusPositions(c, [8, 8, 8]);
    const half = 3.5 * CARD_PITCH;
    expect([p[0], p[1], p[2]]).toEqual([-half, -half, half].map(Math.fround));
    // card 1 is x + 1; card 8 is y + 1 (away from the viewer); card 64 is z + 1 (up)
    expect(p[3] - p[0]).toBeCloseTo(CARD_PITCH, 5);
    expect(p[8 * 3 + 2] - p[2]).toBeCloseTo(-CARD_PITCH, 5);
    expect(p[64 * 3 + 1] - p[1]).toBeCloseTo(CARD_PITCH, 5);
    // centred
    let sx = 0,
      sy = 0,
      sz = 0;
    for (let i = 0; i < 512; i++) {
      sx += p[i * 3];
      sy += p[i * 3 + 1];
      sz += p[i * 3 + 2];
    }
    expect([sx, sy, sz].map((v) => Math.abs(v) < 1e-3)).toEqual([true, true, true]);
  });
  it("detects coordinates and wrap-around links", () => {
    const c = cube(8);
    expect(hasCoordinates(c)).toBe(true);
    expect(hasCoordinates({ ...c, x: [null, ...c.x.slice(1)] })).toBe(false);
    expect(isWrap([0, 3, 3], [7, 3, 3], [8, 8, 8])).toBe(true);
    expect(isWrap([0, 3, 3], [1, 3, 3], [8, 8, 8])).toBe(false);
    expect(isWrap([2, 0, 5], [2, 7, 5], [8, 8, 8])).toBe(true);
    expect(isWrap([0, 0, 0], [1, 0, 0], [2, 2, 2])).toBe(false);
  });
  it("draws a wrap link as two stubs pointing outwards along its axis", () => {
    const [ea, eb] = wrapStubs([-5, 0, 1], [5, 0, 1], 0.5);
    expect(ea).toEqual([-5.5, 0, 1]);
    expect(eb).toEqual([5.5, 0, 1]);
    const [fa, fb] = wrapStubs([0, 4, 0], [0, -4, 0], 1);
    expect(fa).toEqual([0, 5, 0]);
    expect(fb).toEqual([0, -5, 0]);
  });
});

describe("grid fallback (DGX supernodes)", () => {
  it("puts each server's cards in a row, servers apart, nothing overlapping", () => {
    const n = 256;
    const cards = {
      x: new Array(n).fill(null),
      y: new Array(n).fill(null),
      z: new Array(n).fill(null),
      server: Array.from({ length: n }, (_, i) => 1000 + Math.floor(i / 8)),
      slot: Array.from({ length: n }, (_, i) => i % 8),
    };
    const p = gridPositions(cards);
    const seen = new Set<string>();
    for (let i = 0; i < n; i++) {
      const key = `${p[i * 3].toFixed(3)},${p[i * 3 + 2].toFixed(3)}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
      expect(p[i * 3 + 1]).toBe(0);
    }
    // same server → same row (Z), consecutive slots → X + pitch
    expect(p[2]).toBe(p[7 * 3 + 2]);
    expect(p[3] - p[0]).toBeCloseTo(CARD_PITCH, 5);
    // roughly square overall
    let x0 = Infinity,
      x1 = -Infinity,
      z0 = Infinity,
      z1 = -Infinity;
    for (let i = 0; i < n; i++) {
      x0 = Math.min(x0, p[i * 3]);
      x1 = Math.max(x1, p[i * 3]);
      z0 = Math.min(z0, p[i * 3 + 2]);
      z1 = Math.max(z1, p[i * 3 + 2]);
    }
    expect((x1 - x0) / (z1 - z0)).toBeGreaterThan(0.5);
    expect((x1 - x0) / (z1 - z0)).toBeLessThan(2.5);
  });
});

describe("rack positions", () => {
  it("stacks servers by position and puts cards in slot order", () => {
    const servers = [
      { position: 2, cards: [{ slot: 1 }, { slot: 0 }] },
      { position: 0, cards: [{ slot: 0 }] },
    ];
    const r = rackPositions(servers, 1);
    expect(r.slabY.length).toBe(3);
    expect(r.slabY[1]).toBeLessThan(r.slabY[0]); // position 0 below position 2
    expect(r.slabY[2]).toBeGreaterThan(r.slabY[0]); // the device on top
    expect(r.cards[1]).toBe(r.slabY[0]); // first server's cards at its height
    expect(r.cards[0]).toBeGreaterThan(r.cards[3]); // slot 1 right of slot 0
    expect(r.height).toBeGreaterThan(r.slabY[2]);
  });
});
