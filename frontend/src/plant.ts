/**
 * The plant on the floor, pure (no DOM, no three.js): the colour scales of the floor's
 * plant metrics, and where the switch and CDU markers stand.
 *
 * Plant metrics (twin/live/frames.py `PLANT_METRICS`, cluster view only, one value per
 * rack): `coolant_supply_c` (the rack's coolant supply, or inlet air for an air rack)
 * and `cap_share` (the sum of its cards' live power caps as a share of its budget, with
 * a per-rack `binding` flag in the frame). A rack's hottest card is the telemetry
 * metric `gpu_temp_c`, which the cluster view already folds with `max`.
 *
 * Markers: a fabric switch (leaf, spine, core; GET /api/clusters/<id>/switches/) sits at
 * the height of its tier's frame, above the rack that holds it (switches in one rack
 * on a small grid), or spread along the middle of the tier when no rack holds it; a CDU
 * (GET /api/facility/sites/<id>/cdus/) hovers over the centre of the racks on its loop.
 */
import { THERMAL, TRAFFIC, type MetricLike, type SequentialScale } from "./colour";

/** The picker's "Plant" group on the floor, in this order. */
export const PLANT_GROUP = ["coolant_supply_c", "gpu_temp_c", "cap_share"];
/** Metrics only the cluster view streams (a card view falls back to power). */
export const FLOOR_ONLY_METRICS = ["coolant_supply_c", "cap_share"];

/**
 * Coolant supply on a fixed 15–50 °C thermal scale: it spans ASHRAE TC 9.9's liquid
 * cooling classes (facility supply water from W17 up to W45, and the ">45 °C" class
 * begins at the top; "Liquid Cooling Guidelines for Datacom Equipment Centers", 2nd
 * ed.) and an air rack's inlet (A1 recommended 18–27 °C), so a colour means the same
 * temperature on every floor. The default 25–95 °C card scale would paint every
 * coolant blue.
 */
export const COOLANT_DOMAIN: [number, number] = [15, 50];

/** A rack's cap share on 0–100 %, red (a deep cut) → green (the caps leave the budget). */
const CAP_STOPS = TRAFFIC.map(([t, rgb]) => [1 - t, rgb] as const).reverse();

/** The floor's scale of a plant metric; null for any other metric (colour.ts `scaleFor`). */
export function plantScale(metric: MetricLike, view: string): SequentialScale | null {
  if (view !== "cluster") return null;
  const base = { kind: "sequential" as const, metric: metric.key, ratio: false, auto: false };
  if (metric.key === "coolant_supply_c")
    return { ...base, label: "Coolant supply", unit: "°C", domain: [...COOLANT_DOMAIN], stops: THERMAL };
  if (metric.key === "cap_share")
    return { ...base, label: "Power cap / rack budget", unit: "%", domain: [0, 100], stops: CAP_STOPS };
  if (metric.key === "gpu_temp_c")
    return { ...base, label: "Hottest card per rack", unit: "°C", domain: [25, 95], stops: THERMAL };
  return null;
}

/** The fabric switches as GET /api/clusters/<id>/switches/ sends them. */
export interface SwitchList {
  id: number[];
  name: string[];
  kind: string[];
  rack: Array<number | null>;
}

/** The CDUs and their racks as GET /api/facility/sites/<id>/cdus/ sends them. */
export interface CduList {
  id: number[];
  key: string[];
  racks: number[][];
}

/** Marker positions: `index[k]` is the list position of marker k, `xyz` its centre. */
export interface MarkerPlaces {
  index: number[];
  xyz: Float32Array;
}

/** Where racks stand on the floor (x, z), null for a rack the floor does not draw. */
export type RackXZ = (rack: number) => readonly [number, number] | null;

/** Spacing of the switches held by one rack (world units, under half a rack's width). */
export const SWITCH_SPACING = 0.35;

/**
 * Switch marker centres: above the holding rack at its tier's height (`tierY`, null:
 * the tier is not drawn, so neither is the switch), several in a rack on a square grid
 * centred on it (`SWITCH_SPACING` apart, row by row); without a rack, spread evenly across the tier's middle line from x0 to x1.
 */
export function switchPlaces(
  sw: SwitchList,
  rackXZ: RackXZ,
  tierY: (kind: string) => number | null,
  extent: { x0: number; x1: number; z0: number; z1: number },
): MarkerPlaces {
  const perRack = new Map<number, number[]>();
  const loose = new Map<string, number[]>();
  sw.id.forEach((_, k) => {
    const rack = sw.rack[k];
    if (rack !== null && rackXZ(rack)) {
      const list = perRack.get(rack) ?? [];
      list.push(k);
      perRack.set(rack, list);
    } else {
      const list = loose.get(sw.kind[k]) ?? [];
      list.push(k);
      loose.set(sw.kind[k], list);
    }
  });
  const index: number[] = [];
  const xyz: number[] = [];
  for (const [rack, list] of perRack) {
    const [x, z] = rackXZ(rack) as readonly [number, number];
    // A square grid centred on the rack (16 leaves of one network rack: 4 × 4, 1.4 m).
    const cols = Math.ceil(Math.sqrt(list.length));
    const rows = Math.ceil(list.length / cols);
    list.forEach((k, j) => {
      const y = tierY(sw.kind[k]);
      if (y === null) return;
      index.push(k);
      const c = j % cols;
      const r = Math.floor(j / cols);
      xyz.push(x + (c - (cols - 1) / 2) * SWITCH_SPACING, y, z + (r - (rows - 1) / 2) * SWITCH_SPACING);
    });
  }
  const midZ = (extent.z0 + extent.z1) / 2;
  for (const [kind, list] of loose) {
    const y = tierY(kind);
    if (y === null) continue;
    const step = (extent.x1 - extent.x0) / list.length;
    list.forEach((k, j) => {
      index.push(k);
      xyz.push(extent.x0 + step * (j + 0.5), y, midZ);
    });
  }
  return { index, xyz: Float32Array.from(xyz) };
}

/** CDU marker centres: over the mean (x, z) of its drawn racks at height `y`; a CDU
 *  with no rack on the floor has no marker. */
export function cduPlaces(cdus: CduList, rackXZ: RackXZ, y: number): MarkerPlaces {
  const index: number[] = [];
  const xyz: number[] = [];
  cdus.id.forEach((_, k) => {
    let sx = 0;
    let sz = 0;
    let n = 0;
    for (const rack of cdus.racks[k] ?? []) {
      const p = rackXZ(rack);
      if (!p) continue;
      sx += p[0];
      sz += p[1];
      n += 1;
    }
    if (!n) return;
    index.push(k);
    xyz.push(sx / n, y, sz / n);
  });
  return { index, xyz: Float32Array.from(xyz) };
}

/** One rack in the live plant (GET /api/telemetry/clusters/<c>/racks/<r>/plant/). */
export interface RackPlant {
  rack: number;
  ts: number | null;
  budget_w: number | null;
  supply_c: number | null;
  return_c: number | null;
  flow_kg_s: number | null;
  card_c: number | null;
  max_gpu_temp_c: number | null;
  capping_mode: string;
  caps_w: number | null;
  cap_share: number | null;
  binding: boolean | null;
}

const celsius = (v: number | null): string => (v === null ? "—" : `${v.toFixed(1)} °C`);

/** The rack panel's "Plant" rows (label, text): coolant, card temperatures, the cap. */
export function plantRows(p: RackPlant): Array<[string, string]> {
  const cap =
    p.capping_mode === "off" || p.caps_w === null
      ? "capping off"
      : `${(p.caps_w / 1000).toFixed(1)} kW` +
        (p.cap_share === null ? "" : ` = ${(p.cap_share * 100).toFixed(1)} % of the budget`) +
        (p.binding ? " · a limit binds here" : "") +
        (p.capping_mode === "propose" ? " (proposed)" : "");
  return [
    ["Coolant supply", celsius(p.supply_c)],
    ["Coolant return", celsius(p.return_c)],
    ["Coolant flow", p.flow_kg_s === null ? "—" : `${p.flow_kg_s.toFixed(2)} kg/s`],
    ["Hottest card (reading)", celsius(p.max_gpu_temp_c)],
    ["Card temperature (plant model)", celsius(p.card_c)],
    ["Power cap", cap],
  ];
}
