import { describe, expect, it } from "vitest";

import { compile, gradientAt, THERMAL } from "./colour";
import {
  COOLANT_DOMAIN,
  SWITCH_SPACING,
  cduPlaces,
  plantRows,
  plantScale,
  switchPlaces,
  type RackPlant,
} from "./plant";

const COOLANT = { key: "coolant_supply_c", label: "Coolant supply", unit: "°C" };
const CAPS = { key: "cap_share", label: "Power cap / rack budget", unit: "%" };
const TEMP = { key: "gpu_temp_c", label: "GPU temperature", unit: "°C" };

describe("plantScale", () => {
  it("puts coolant on a fixed 15–50 °C thermal scale, on the floor only", () => {
    const s = plantScale(COOLANT, "cluster");
    expect(s).not.toBeNull();
    expect(s?.domain).toEqual(COOLANT_DOMAIN);
    expect(s?.stops).toBe(THERMAL);
    expect(s?.auto).toBe(false);
    expect(plantScale(COOLANT, "supernode")).toBeNull();
    expect(plantScale({ key: "power_w", label: "Power", unit: "W" }, "cluster")).toBeNull();
  });

  it("colours a warmer coolant differently from a cooler one", () => {
    const s = plantScale(COOLANT, "cluster");
    if (!s) throw new Error("no scale");
    const palette = compile(s);
    expect(palette.scale.kind).toBe("sequential");
    // 18 °C (an air inlet) and 45 °C (W45 supply) land at opposite ends of the gradient
    const lo = (18 - 15) / 35;
    const hi = (45 - 15) / 35;
    expect(gradientAt(THERMAL, lo)).not.toEqual(gradientAt(THERMAL, hi));
  });

  it("shows a deep cap cut red and a cap at the budget green", () => {
    const s = plantScale(CAPS, "cluster");
    expect(s?.domain).toEqual([0, 100]);
    expect(s?.unit).toBe("%");
    if (!s) return;
    expect(gradientAt(s.stops, 0)).toEqual([218, 54, 51]);
    expect(gradientAt(s.stops, 1)).toEqual([46, 160, 67]);
  });

  it("labels the floor's card temperature as the hottest card per rack", () => {
    expect(plantScale(TEMP, "cluster")?.label).toBe("Hottest card per rack");
    expect(plantScale(TEMP, "rack")).toBeNull();
  });
});

const racks = new Map<number, [number, number]>([
  [10, [0, 0]],
  [11, [4, 0]],
  [12, [0, 6]],
]);
const rackXZ = (r: number) => racks.get(r) ?? null;

describe("switchPlaces", () => {
  const tierY = (kind: string) => ({ leaf: 5, spine: 8 })[kind] ?? null;
  const extent = { x0: -2, x1: 6, z0: -1, z1: 7 };

  it("puts a racked switch above its rack at its tier, several in one rack on a grid", () => {
    const sw = {
      id: [1, 2, 3, 4, 5],
      name: ["l0", "l1", "l2", "l3", "l4"],
      kind: ["leaf", "leaf", "leaf", "leaf", "leaf"],
      rack: [10, 10, 10, 10, 11],
    };
    const p = switchPlaces(sw, rackXZ, tierY, extent);
    expect(p.index).toEqual([0, 1, 2, 3, 4]);
    const h = SWITCH_SPACING / 2;
    // four in rack 10: a 2 × 2 grid centred on (0, 0); one in rack 11 right above it
    expect(Array.from(p.xyz)).toEqual([-h, 5, -h, h, 5, -h, -h, 5, h, h, 5, h, 4, 5, 0].map(Math.fround));
  });

  it("spreads switches without a rack along the tier's middle, and skips undrawn tiers", () => {
    const sw = { id: [7, 8, 9], name: ["s0", "s1", "c0"], kind: ["spine", "spine", "core"], rack: [null, 99, null] };
    const p = switchPlaces(sw, rackXZ, tierY, extent);
    // rack 99 is not on the floor: loose like s0; core has no tier frame: not drawn
    expect(p.index).toEqual([0, 1]);
    expect(Array.from(p.xyz)).toEqual([0, 8, 3, 4, 8, 3]);
  });
});

describe("cduPlaces", () => {
  it("puts a CDU over the centre of its drawn racks and skips one without racks", () => {
    const cdus = { id: [1, 2, 3], key: ["cdu-0", "cdu-1", "cdu-2"], racks: [[10, 11, 12], [], [99]] };
    const p = cduPlaces(cdus, rackXZ, 2.5);
    expect(p.index).toEqual([0]);
    expect(Array.from(p.xyz)).toEqual([4 / 3, 2.5, 2].map(Math.fround));
  });
});

describe("plantRows", () => {
  const base: RackPlant = {
    rack: 1,
    ts: 1,
    budget_w: 40000,
    supply_c: 32.04,
    return_c: 41.5,
    flow_kg_s: 0.812,
    card_c: 61.2,
    max_gpu_temp_c: 70.4,
    capping_mode: "apply",
    caps_w: 30000,
    cap_share: 0.75,
    binding: true,
  };
  it("shows coolant, temperatures and the cap with its share and binding", () => {
    const rows = Object.fromEntries(plantRows(base));
    expect(rows["Coolant supply"]).toBe("32.0 °C");
    expect(rows["Coolant flow"]).toBe("0.81 kg/s");
    expect(rows["Hottest card (reading)"]).toBe("70.4 °C");
    expect(rows["Power cap"]).toBe("30.0 kW = 75.0 % of the budget · a limit binds here");
  });
  it("says capping is off, and dashes where the plant has no value", () => {
    const rows = Object.fromEntries(
      plantRows({ ...base, capping_mode: "off", caps_w: null, cap_share: null, binding: null, supply_c: null }),
    );
    expect(rows["Power cap"]).toBe("capping off");
    expect(rows["Coolant supply"]).toBe("—");
  });
});
