/**
 * Decoding of the live view messages (twin/live/frames.py) into typed arrays,
 * pure: no DOM, no websocket, no three.js.
 *
 * A *snapshot* carries the keys (rack ids or card ids) and values; a *frame*
 * only values, in the snapshot's key order. The scene draws its instances in
 * its own order (floor order, card index), so a snapshot builds the map
 * "position in the message → instance index" once, and every frame is then one
 * pass writing a Float64Array (null → NaN, "no reading"; 64-bit so `valueOf`
 * returns exactly what the server sent).
 *
 * What is ignored, so the scene never shows a wrong state:
 * - messages of another view / object / metric (in flight while switching);
 * - frames before the first snapshot, or of another `layout` (the server sends
 *   a new snapshot with the new key order);
 * - frames whose `seq` is not newer than what was applied (late or repeated).
 */

export type ViewKind = "cluster" | "supernode" | "rack";

export interface Subscription {
  view: ViewKind;
  id: number | null;
  metric: string;
}

export interface FrameMessage {
  type: "frame" | "snapshot";
  view: ViewKind;
  id: number | null;
  metric: string;
  seq: number;
  ts: number | null;
  layout: string;
  values: Array<number | null>;
  /** Health codes per key (card views). */
  health?: number[];
  /** Per rack 1 where a power limit binds (the floor's `cap_share` view). */
  binding?: number[];
}

export interface SnapshotMessage extends FrameMessage {
  type: "snapshot";
  keys: number[];
  names?: string[];
  unit?: string;
  aggregate?: string;
  /** Per-rack budgets (cluster view, power). */
  budget_w?: Array<number | null>;
}

/** Whether a message belongs to a subscription (same view, object and metric). */
export function sameView(msg: { view: string; id: number | null; metric: string }, sub: Subscription): boolean {
  return msg.view === sub.view && (msg.id ?? null) === (sub.id ?? null) && msg.metric === sub.metric;
}

/**
 * Message position → instance index (−1 when the scene does not draw that key).
 */
export function indexMap(keys: ArrayLike<number>, instanceOf: ReadonlyMap<number, number>): Int32Array {
  const map = new Int32Array(keys.length);
  for (let k = 0; k < keys.length; k++) {
    const i = instanceOf.get(keys[k]);
    map[k] = i === undefined ? -1 : i;
  }
  return map;
}

/** Write `values` (null → NaN) into `out` at the mapped instance indices. */
export function decodeInto(values: ArrayLike<number | null>, map: Int32Array, out: Float64Array | Float32Array): void {
  const n = Math.min(values.length, map.length);
  for (let k = 0; k < n; k++) {
    const i = map[k];
    if (i < 0) continue;
    const v = values[k];
    out[i] = v === null || v === undefined ? Number.NaN : v;
  }
}

/**
 * The live state of the instances of one drawn view: values, health codes and
 * (cluster view) budgets per instance, fed by snapshots and frames.
 */
export class ViewFrames {
  readonly keys: readonly number[];
  readonly instanceOf: ReadonlyMap<number, number>;
  readonly values: Float64Array;
  readonly health: Float64Array;
  readonly budget: Float64Array;
  /** Per instance 1/0: a power limit binds there (cap_share frames), NaN otherwise. */
  readonly binding: Float64Array;
  sub: Subscription | null = null;
  seq = -1;
  layout: string | null = null;
  ts: number | null = null;
  unit = "";
  /** Frames (and snapshots) applied since the view was made. */
  applied = 0;
  private map: Int32Array | null = null;

  /** `keys`: the drawn instances' keys, in instance order. */
  constructor(keys: ArrayLike<number>) {
    this.keys = Array.from(keys);
    const m = new Map<number, number>();
    this.keys.forEach((key, i) => m.set(key, i));
    this.instanceOf = m;
    const n = this.keys.length;
    this.values = new Float64Array(n).fill(Number.NaN);
    this.health = new Float64Array(n).fill(Number.NaN);
    this.budget = new Float64Array(n).fill(Number.NaN);
    this.binding = new Float64Array(n).fill(Number.NaN);
  }

  /** Follow another subscription: what was applied is forgotten (all NaN). */
  follow(sub: Subscription): void {
    this.sub = { ...sub };
    this.seq = -1;
    this.layout = null;
    this.map = null;
    this.ts = null;
    this.values.fill(Number.NaN);
    this.health.fill(Number.NaN);
  }

  /** Apply a snapshot or frame; false when it was ignored (see the module docstring). */
  apply(msg: FrameMessage): boolean {
    if (!this.sub || !sameView(msg, this.sub)) return false;
    if (msg.type === "snapshot") return this.applySnapshot(msg as SnapshotMessage);
    if (!this.map || msg.layout !== this.layout || msg.seq <= this.seq) return false;
    this.write(msg);
    return true;
  }

  private applySnapshot(msg: SnapshotMessage): boolean {
    if (!Array.isArray(msg.keys)) return false;
    // Same layout and older than what we hold: a late snapshot, ignore it.
    if (msg.layout === this.layout && msg.seq < this.seq) return false;
    this.map = indexMap(msg.keys, this.instanceOf);
    this.layout = msg.layout;
    this.unit = msg.unit ?? "";
    this.values.fill(Number.NaN);
    this.health.fill(Number.NaN);
    if (msg.budget_w) decodeInto(msg.budget_w, this.map, this.budget);
    this.write(msg);
    return true;
  }

  private write(msg: FrameMessage): void {
    const map = this.map as Int32Array;
    decodeInto(msg.values, map, this.values);
    if (msg.health) decodeInto(msg.health, map, this.health);
    if (msg.binding) decodeInto(msg.binding, map, this.binding);
    else this.binding.fill(Number.NaN);
    this.seq = msg.seq;
    this.ts = msg.ts;
    this.applied += 1;
  }

  /** Whether a power limit binds at `key` (null: not said, e.g. another metric). */
  bindingOf(key: number): boolean | null {
    const i = this.instanceOf.get(key);
    if (i === undefined) return null;
    const v = this.binding[i];
    return v !== v ? null : v > 0;
  }

  /** The last value applied to `key` (null: none, or no reading). */
  valueOf(key: number, health = false): number | null {
    const i = this.instanceOf.get(key);
    if (i === undefined) return null;
    const v = health ? this.health[i] : this.values[i];
    return v !== v ? null : v;
  }
}
