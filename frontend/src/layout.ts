/**
 * Deterministic layouts of the 3D views (pure: arrays in, arrays out; no three.js).
 *
 * Why deterministic: the same cluster must look the same on every screen and
 * after every reload, so an operator can say "the hot rack at the back left"
 * and a colleague finds it; no force simulation, no randomness.
 *
 * World axes: X to the right, Y up, Z towards the viewer. One unit ≈ one metre
 * on the floor plan.
 */

/** Rack box and floor pitches (world units). */
export const RACK = { w: 0.8, d: 1.1, h: 2.0 } as const;
export const SLOT_PITCH = 1.0;
export const ROW_PITCH = 2.4;
/** Free space between two supernode groups (and around the network block). */
export const GROUP_GAP = 2.6;
/** Width / depth the group grid aims at (a landscape floor fills a landscape canvas). */
export const FLOOR_ASPECT = 1.6;

export interface FloorRacks {
  id: ArrayLike<number>;
  row: ArrayLike<number>;
  slot: ArrayLike<number>;
  supernode: ArrayLike<number | null>;
}

export interface FloorSupernodes {
  id: ArrayLike<number>;
  index: ArrayLike<number>;
  name: ArrayLike<string>;
}

export interface FloorGroup {
  /** Supernode id, or null for the racks outside any supernode (network racks). */
  supernode: number | null;
  name: string;
  /** Floor rectangle (world X/Z) of the group, racks included. */
  x0: number;
  z0: number;
  x1: number;
  z1: number;
  /** Positions (into the racks arrays) of its racks. */
  racks: number[];
}

export interface FloorLayout {
  /** Rack centre on the floor, per rack position. */
  x: Float32Array;
  z: Float32Array;
  /** Group of each rack (index into `groups`). */
  group: Int32Array;
  groups: FloorGroup[];
  /** Bounds of the whole floor. */
  x0: number;
  z0: number;
  x1: number;
  z1: number;
  /** Columns of the supernode group grid. */
  columns: number;
}

interface LocalGroup {
  supernode: number | null;
  order: number;
  name: string;
  racks: number[];
  minRow: number;
  minSlot: number;
  w: number;
  d: number;
}

/** Size of a group: its racks at their (row, slot) relative to the group's first row/slot. */
function footprint(rows: number, slots: number): { w: number; d: number } {
  return { w: slots * SLOT_PITCH, d: rows * ROW_PITCH };
}

/**
 * Floor plan: racks at their (row, slot), grouped by supernode. Each supernode's
 * racks keep their relative rows and slots; the groups are laid out in a grid
 * (ordered by supernode index) whose column count makes the floor about
 * {@link FLOOR_ASPECT} wide per deep, with {@link GROUP_GAP} between groups, so
 * a million-card cluster (2,048 supernodes) is a compact field rather than a
 * 2,048-row strip. Racks outside any supernode form one block below the grid.
 * The floor is centred on the origin.
 */
export function floorLayout(racks: FloorRacks, supernodes: FloorSupernodes): FloorLayout {
  const n = racks.id.length;
  const snOrder = new Map<number, { order: number; name: string }>();
  for (let i = 0; i < supernodes.id.length; i++) {
    snOrder.set(supernodes.id[i], { order: supernodes.index[i], name: supernodes.name[i] });
  }
  const byKey = new Map<string, LocalGroup>();
  for (let i = 0; i < n; i++) {
    const sn = racks.supernode[i];
    const key = sn === null || sn === undefined ? "net" : String(sn);
    let g = byKey.get(key);
    if (!g) {
      const info = sn === null || sn === undefined ? undefined : snOrder.get(sn);
      g = {
        supernode: sn ?? null,
        order: info ? info.order : (sn ?? Number.MAX_SAFE_INTEGER),
        name: info ? info.name : sn === null || sn === undefined ? "network" : `supernode ${sn}`,
        racks: [],
        minRow: Infinity,
        minSlot: Infinity,
        w: 0,
        d: 0,
      };
      byKey.set(key, g);
    }
    g.racks.push(i);
    g.minRow = Math.min(g.minRow, racks.row[i]);
    g.minSlot = Math.min(g.minSlot, racks.slot[i]);
  }
  for (const g of byKey.values()) {
    let rows = 0;
    let slots = 0;
    for (const i of g.racks) {
      rows = Math.max(rows, racks.row[i] - g.minRow + 1);
      slots = Math.max(slots, racks.slot[i] - g.minSlot + 1);
    }
    Object.assign(g, footprint(rows, slots));
  }
  const all = [...byKey.values()];
  const sn = all
    .filter((g) => g.supernode !== null)
    .sort((a, b) => a.order - b.order || (a.supernode ?? 0) - (b.supernode ?? 0));
  const net = all.filter((g) => g.supernode === null);

  const cellW = Math.max(0, ...sn.map((g) => g.w)) + GROUP_GAP;
  const cellD = Math.max(0, ...sn.map((g) => g.d)) + GROUP_GAP;
  const columns = sn.length ? bestColumns(sn.length, cellW, cellD) : 1;

  const x = new Float32Array(n);
  const z = new Float32Array(n);
  const group = new Int32Array(n);
  const groups: FloorGroup[] = [];
  const place = (g: LocalGroup, ox: number, oz: number): void => {
    const gi = groups.length;
    for (const i of g.racks) {
      x[i] = ox + (racks.slot[i] - g.minSlot + 0.5) * SLOT_PITCH;
      z[i] = oz + (racks.row[i] - g.minRow + 0.5) * ROW_PITCH;
      group[i] = gi;
    }
    groups.push({ supernode: g.supernode, name: g.name, x0: ox, z0: oz, x1: ox + g.w, z1: oz + g.d, racks: g.racks });
  };
  sn.forEach((g, k) => place(g, (k % columns) * cellW, Math.floor(k / columns) * cellD));
  const gridRows = Math.ceil(sn.length / columns);
  const oz = gridRows * cellD;
  let ox = 0;
  for (const g of net) {
    place(g, ox, oz);
    ox += g.w + GROUP_GAP;
  }

  // Centre on the origin.
  let x0 = Infinity;
  let z0 = Infinity;
  let x1 = -Infinity;
  let z1 = -Infinity;
  for (const g of groups) {
    x0 = Math.min(x0, g.x0);
    z0 = Math.min(z0, g.z0);
    x1 = Math.max(x1, g.x1);
    z1 = Math.max(z1, g.z1);
  }
  if (!groups.length) {
    x0 = z0 = x1 = z1 = 0;
  }
  const cx = (x0 + x1) / 2;
  const cz = (z0 + z1) / 2;
  for (let i = 0; i < n; i++) {
    x[i] -= cx;
    z[i] -= cz;
  }
  for (const g of groups) {
    g.x0 -= cx;
    g.x1 -= cx;
    g.z0 -= cz;
    g.z1 -= cz;
  }
  return { x, z, group, groups, x0: x0 - cx, z0: z0 - cz, x1: x1 - cx, z1: z1 - cz, columns };
}

/** Column count whose grid's width / depth is closest to {@link FLOOR_ASPECT}. */
export function bestColumns(count: number, cellW: number, cellD: number): number {
  let best = 1;
  let bestErr = Infinity;
  for (let c = 1; c <= count; c++) {
    const rows = Math.ceil(count / c);
    const err = Math.abs(Math.log((c * cellW) / (rows * cellD) / FLOOR_ASPECT));
    if (err < bestErr - 1e-12) {
      best = c;
      bestErr = err;
    }
  }
  return best;
}

/** Distance between neighbouring cards in the supernode view. */
export const CARD_PITCH = 1.6;
export const CARD_SIZE = 0.7;

export interface CardCoords {
  x: ArrayLike<number | null>;
  y: ArrayLike<number | null>;
  z: ArrayLike<number | null>;
  server: ArrayLike<number>;
  slot: ArrayLike<number>;
}

/** Whether every card has torus coordinates (else the grid fallback is used). */
export function hasCoordinates(cards: CardCoords): boolean {
  const n = cards.x.length;
  if (n === 0) return false;
  for (let i = 0; i < n; i++) {
    if (cards.x[i] === null || cards.y[i] === null || cards.z[i] === null) return false;
  }
  return true;
}

/**
 * Card centres (3 floats per card) at their torus coordinates, centred: torus x
 * → world X, torus z → up (Y), torus y → away from the viewer (−Z), so card
 * (0, 0, 0) sits at the front-left-bottom corner, which the default camera sees.
 */
export function torusPositions(cards: CardCoords, dims: readonly number[] | null, pitch = CARD_PITCH): Float32Array {
  const n = cards.x.length;
  const out = new Float32Array(n * 3);
  let mx = 0,
    my = 0,
    mz = 0;
  for (let i = 0; i < n; i++) {
    mx = Math.max(mx, cards.x[i] ?? 0);
    my = Math.max(my, cards.y[i] ?? 0);
    mz = Math.max(mz, cards.z[i] ?? 0);
  }
  const dx = dims && dims[0] ? dims[0] : mx + 1;
  const dy = dims && dims[1] ? dims[1] : my + 1;
  const dz = dims && dims[2] ? dims[2] : mz + 1;
  for (let i = 0; i < n; i++) {
    out[i * 3] = ((cards.x[i] ?? 0) - (dx - 1) / 2) * pitch;
    out[i * 3 + 1] = ((cards.z[i] ?? 0) - (dz - 1) / 2) * pitch;
    out[i * 3 + 2] = -((cards.y[i] ?? 0) - (dy - 1) / 2) * pitch;
  }
  return out;
}

/**
 * Fallback when cards have no torus coordinates (DGX supernodes): one row of
 * cards per server (by slot), servers in a grid of about square overall shape,
 * ordered as the cards come (by index), centred, on the floor plane (Y = 0).
 */
export function gridPositions(cards: CardCoords, pitch = CARD_PITCH): Float32Array {
  const n = cards.server.length;
  const out = new Float32Array(n * 3);
  const serverOrder = new Map<number, number>();
  let perServer = 1;
  const counts = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const s = cards.server[i];
    if (!serverOrder.has(s)) serverOrder.set(s, serverOrder.size);
    counts.set(s, (counts.get(s) ?? 0) + 1);
  }
  for (const c of counts.values()) perServer = Math.max(perServer, c);
  let maxSlot = perServer - 1;
  for (let i = 0; i < n; i++) maxSlot = Math.max(maxSlot, cards.slot[i]);
  const servers = serverOrder.size;
  const rowW = (maxSlot + 2) * pitch; // a gap of one pitch between servers
  const rowD = 1.5 * pitch;
  const columns = Math.max(1, Math.round(Math.sqrt((servers * rowD) / rowW)));
  const gridRows = Math.ceil(servers / columns);
  const width = columns * rowW - pitch;
  const depth = gridRows * rowD;
  for (let i = 0; i < n; i++) {
    const s = serverOrder.get(cards.server[i]) ?? 0;
    const col = s % columns;
    const row = Math.floor(s / columns);
    out[i * 3] = col * rowW + cards.slot[i] * pitch - width / 2 + pitch / 2;
    out[i * 3 + 1] = 0;
    out[i * 3 + 2] = row * rowD - depth / 2 + rowD / 2;
  }
  return out;
}

/**
 * Whether a link between torus coordinates `a` and `b` wraps around: its ends
 * differ by more than one step along an axis (the 0 ↔ n−1 neighbours). In a
 * ring of 2 the two links coincide, and neither is drawn as a wrap.
 */
export function isWrap(a: readonly number[], b: readonly number[], dims: readonly number[] | null): boolean {
  for (let k = 0; k < 3; k++) {
    const d = Math.abs(a[k] - b[k]);
    if (d > 1 && (!dims || dims[k] > 2)) return true;
  }
  return false;
}

/**
 * A wrap-around link is drawn as two stubs, one leaving each end outwards along
 * the axis it wraps on (so it neither crosses the cube nor hides it): returns
 * the stub ends (3 floats each) for card centres `pa`, `pb`.
 */
export function wrapStubs(
  pa: ArrayLike<number>,
  pb: ArrayLike<number>,
  length = CARD_PITCH * 0.55,
): [number[], number[]] {
  let axis = 0;
  let best = -1;
  for (let k = 0; k < 3; k++) {
    const d = Math.abs(pa[k] - pb[k]);
    if (d > best) {
      best = d;
      axis = k;
    }
  }
  const sign = pa[axis] < pb[axis] ? -1 : 1; // a is the low end → its stub points further down
  const ea = [pa[0], pa[1], pa[2]];
  const eb = [pb[0], pb[1], pb[2]];
  ea[axis] += sign * length;
  eb[axis] -= sign * length;
  return [ea, eb];
}

/** Rack view: server slab height and pitch, card size within a server. */
export const SERVER = { w: 1.6, h: 0.32, d: 1.0, pitch: 0.4 } as const;

/**
 * Rack view positions: servers stacked bottom-up by position (devices after
 * them), each server's cards in a row across its front, by slot.
 * Returns the server/device slab centres (Y) and card centres (3 floats each).
 */
export function rackPositions(
  servers: ReadonlyArray<{ position: number; cards: ReadonlyArray<{ slot: number }> }>,
  devices: number,
): { slabY: Float32Array; cards: Float32Array; height: number } {
  const order = servers.map((s, i) => [s.position, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const slabs = servers.length + devices;
  const slabY = new Float32Array(slabs);
  const place = new Map<number, number>();
  order.forEach(([, i], k) => place.set(i, k));
  for (let k = 0; k < slabs; k++) slabY[k] = SERVER.pitch * (k + 0.5);
  const total = servers.reduce((t, s) => t + s.cards.length, 0);
  const cards = new Float32Array(total * 3);
  let c = 0;
  servers.forEach((s, i) => {
    const y = slabY[place.get(i) ?? 0];
    const per = Math.max(8, ...s.cards.map((card) => card.slot + 1));
    const step = (SERVER.w - 0.1) / per;
    for (const card of s.cards) {
      cards[c * 3] = -SERVER.w / 2 + 0.05 + step * (card.slot + 0.5);
      cards[c * 3 + 1] = y;
      cards[c * 3 + 2] = SERVER.d / 2 + 0.05;
      c++;
    }
  });
  // Slabs of servers in position order, then the devices.
  const ordered = new Float32Array(slabs);
  servers.forEach((_, i) => {
    ordered[i] = slabY[place.get(i) ?? 0];
  });
  for (let k = servers.length; k < slabs; k++) ordered[k] = slabY[k];
  return { slabY: ordered, cards, height: SERVER.pitch * slabs };
}
