import { describe, expect, it } from "vitest";

import {
  CODE_CATEGORY,
  CODE_NETWORK,
  CODE_NO_DATA,
  CODE_OVER,
  HEALTH_METRIC,
  LUT_SIZE,
  NO_DATA_RGB,
  autoDomain,
  compile,
  cssGradient,
  gradientAt,
  hex,
  legendOf,
  niceCeil,
  paint,
  scaleFor,
  srgbToLinear,
} from "./colour";
import { utilisationColour } from "./format";

const POWER = { key: "power_w", label: "Power draw", unit: "W" };
const UTIL = { key: "gpu_util", label: "GPU utilization", unit: "%" };
const TEMP = { key: "gpu_temp_c", label: "GPU temperature", unit: "°C" };
const HBM = { key: "hbm_used_gib", label: "HBM used", unit: "GiB" };

describe("scaleFor", () => {
  it("maps rack power to a ratio of the budget in the cluster view", () => {
    const s = scaleFor(POWER, "cluster");
    expect(s.kind).toBe("sequential");
    if (s.kind !== "sequential") return;
    expect(s.ratio).toBe(true);
    expect(s.domain).toEqual([0, 1]);
  });
  it("uses fixed domains for percentages and temperatures, auto otherwise", () => {
    const u = scaleFor(UTIL, "supernode");
    const t = scaleFor(TEMP, "supernode");
    const p = scaleFor(POWER, "supernode");
    const m = scaleFor(HBM, "rack");
    expect(u.kind === "sequential" && u.domain).toEqual([0, 100]);
    expect(t.kind === "sequential" && t.domain).toEqual([25, 95]);
    expect(p.kind === "sequential" && p.auto && !p.ratio).toBe(true);
    expect(m.kind === "sequential" && m.auto).toBe(true);
    // before any reading an auto scale starts from a plausible range for its unit
    expect(p.kind === "sequential" && p.domain).toEqual([0, 1000]);
    expect(m.kind === "sequential" && m.domain).toEqual([0, 80]);
  });
  it("makes health categorical", () => {
    expect(scaleFor(HEALTH_METRIC, "supernode").kind).toBe("categorical");
  });
});

describe("compile (the LUT)", () => {
  it("has 256 gradient steps from the first stop to the last", () => {
    const p = compile(scaleFor(UTIL, "supernode"));
    expect(p.hex[0]).toBe("#2c3e9e");
    expect(p.hex[LUT_SIZE - 1]).toBe("#fde725");
    expect(p.linear.length).toBe((CODE_CATEGORY + 5) * 3);
    for (let i = 0; i < LUT_SIZE; i++) expect(p.hex[i]).toMatch(/^#[0-9a-f]{6}$/);
  });
  it("stores linear light that round-trips to the sRGB hex", () => {
    const p = compile(scaleFor(TEMP, "supernode"));
    for (const code of [0, 77, 200, 255, CODE_NO_DATA]) {
      const back = [0, 1, 2].map((k) => {
        const l = p.linear[code * 3 + k];
        const s = l <= 0.0031308 ? l * 12.92 : 1.055 * l ** (1 / 2.4) - 0.055;
        return Math.round(s * 255);
      });
      expect(hex(back as unknown as [number, number, number])).toBe(p.hex[code]);
    }
    expect(srgbToLinear(0)).toBe(0);
    expect(srgbToLinear(255)).toBeCloseTo(1, 6);
  });
  it("clamps values outside the domain to the ends", () => {
    const p = compile(scaleFor(UTIL, "supernode"));
    expect(p.code(-5)).toBe(0);
    expect(p.code(0)).toBe(0);
    expect(p.code(50)).toBe(128);
    expect(p.code(100)).toBe(255);
    expect(p.code(1e9)).toBe(255);
  });
  it("turns NaN into the no-data grey", () => {
    const p = compile(scaleFor(UTIL, "supernode"));
    expect(p.code(Number.NaN)).toBe(CODE_NO_DATA);
    expect(p.hex[CODE_NO_DATA]).toBe(hex(NO_DATA_RGB));
    const ratio = compile(scaleFor(POWER, "cluster"));
    expect(ratio.code(Number.NaN, 40_000)).toBe(CODE_NO_DATA);
    expect(ratio.code(100, Number.NaN)).toBe(CODE_NO_DATA);
  });
  it("colours rack power like the 2D floor did, and marks over-budget racks", () => {
    const p = compile(scaleFor(POWER, "cluster"));
    expect(p.code(40_001, 40_000)).toBe(CODE_OVER);
    expect(p.hex[CODE_OVER]).toBe("#b000b5");
    for (const w of [4_000, 30_000, 35_000, 40_000]) {
      const ours = p.hex[p.code(w, 40_000)];
      const theirs = utilisationColour(w, 40_000);
      // Same stops; the LUT quantises to 1/255 of the budget.
      const d = [1, 3, 5].map((k) =>
        Math.abs(parseInt(ours.slice(k, k + 2), 16) - parseInt(theirs.slice(k, k + 2), 16)),
      );
      expect(Math.max(...d)).toBeLessThanOrEqual(2);
    }
  });
  it("maps health codes to their categories (0 = unknown = no data)", () => {
    const p = compile(scaleFor(HEALTH_METRIC, "supernode"));
    expect(p.code(0)).toBe(CODE_NO_DATA);
    expect(p.code(1)).toBe(CODE_CATEGORY + 1);
    expect(p.hex[p.code(1)]).toBe("#2ea043");
    expect(p.hex[p.code(3)]).toBe("#e53935");
    expect(p.code(4)).toBe(CODE_CATEGORY + 4);
    expect(p.code(99)).toBe(CODE_NO_DATA);
    expect(p.code(Number.NaN)).toBe(CODE_NO_DATA);
  });
});

describe("paint", () => {
  it("writes the LUT's linear colour and the code per instance", () => {
    const p = compile(scaleFor(UTIL, "supernode"));
    const values = new Float64Array([0, 100, Number.NaN, 50]);
    const out = new Float32Array(12);
    const codes = new Uint16Array(4);
    const fixed = new Int16Array([-1, -1, -1, CODE_NETWORK]);
    paint(p, values, out, codes, undefined, fixed);
    expect(Array.from(codes)).toEqual([0, 255, CODE_NO_DATA, CODE_NETWORK]);
    expect(Array.from(out.subarray(3, 6))).toEqual(Array.from(p.linear.subarray(255 * 3, 256 * 3)));
    expect(Array.from(out.subarray(6, 9))).toEqual(
      Array.from(p.linear.subarray(CODE_NO_DATA * 3, CODE_NO_DATA * 3 + 3)),
    );
  });
  it("divides by the per-instance budget on a ratio scale", () => {
    const p = compile(scaleFor(POWER, "cluster"));
    const codes = new Uint16Array(2);
    paint(p, new Float64Array([20_000, 20_000]), new Float32Array(6), codes, new Float64Array([40_000, 10_000]));
    expect(codes[0]).toBe(128);
    expect(codes[1]).toBe(CODE_OVER);
  });
  it("recolours 512 cards well inside the 5 ms budget", () => {
    const p = compile(scaleFor(POWER, "supernode"));
    const values = new Float64Array(512).map((_, i) => i);
    const out = new Float32Array(512 * 3);
    const codes = new Uint16Array(512);
    const t0 = performance.now();
    for (let k = 0; k < 100; k++) paint(p, values, out, codes);
    expect((performance.now() - t0) / 100).toBeLessThan(1);
  });
});

describe("domains", () => {
  it("rounds the ceiling to a tidy number", () => {
    expect(niceCeil(0.65)).toBe(0.7);
    expect(niceCeil(0.9)).toBe(1);
    expect(niceCeil(1)).toBe(1);
    expect(niceCeil(1.3)).toBe(1.5);
    expect(niceCeil(2.2)).toBe(2.5);
    expect(niceCeil(655)).toBe(700);
    expect(niceCeil(420)).toBe(500);
    expect(niceCeil(0)).toBe(1);
  });
  it("follows the data, ignoring NaN", () => {
    expect(autoDomain([Number.NaN, 310, 655.5])).toEqual([0, 700]);
    expect(autoDomain([Number.NaN])).toBeNull();
    expect(autoDomain([])).toBeNull();
    expect(autoDomain([-3.5, 4.2])).toEqual([-4, 5]);
  });
});

describe("legend", () => {
  it("gives the gradient stops, ticks with the unit, and a no-data swatch", () => {
    const s = scaleFor(TEMP, "supernode");
    const legend = legendOf(compile(s));
    expect(legend.title).toBe("GPU temperature (°C)");
    expect(legend.gradient[0]).toEqual({ offset: 0, colour: "#3b82f6" });
    expect(legend.gradient.at(-1)).toEqual({ offset: 1, colour: "#ef4444" });
    expect(legend.ticks).toEqual([
      [0, "25 °C"],
      [0.5, "60 °C"],
      [1, "95 °C"],
    ]);
    expect(legend.swatches.at(-1)).toEqual({ label: "no data", colour: hex(NO_DATA_RGB) });
    expect(cssGradient(legend)).toBe(
      "linear-gradient(to right, #3b82f6 0.0%, #22c55e 40.0%, #eab308 70.0%, #ef4444 100.0%)",
    );
  });
  it("shows budget percentages, over budget and network racks for rack power", () => {
    const legend = legendOf(compile(scaleFor(POWER, "cluster")), true);
    expect(legend.ticks.map((t) => t[1])).toEqual(["0 %", "50 %", "75 %", "100 %"]);
    expect(legend.swatches.map((s) => s.label)).toEqual(["over budget", "network rack", "no data"]);
  });
  it("lists the health categories", () => {
    const legend = legendOf(compile(scaleFor(HEALTH_METRIC, "rack")));
    expect(legend.gradient).toEqual([]);
    expect(legend.swatches.map((s) => s.label)).toEqual(["ok", "warning", "critical", "stale", "no data"]);
  });
  it("abbreviates large tick values", () => {
    const s = scaleFor({ key: "energy_kj", label: "Energy", unit: "kJ" }, "supernode");
    if (s.kind === "sequential") s.domain = [0, 250_000];
    expect(legendOf(compile(s)).ticks.map((t) => t[1])).toEqual(["0 kJ", "125k kJ", "250k kJ"]);
  });
  it("interpolates the gradient between stops", () => {
    expect(
      gradientAt(
        [
          [0, [0, 0, 0]],
          [1, [200, 100, 50]],
        ],
        0.5,
      ),
    ).toEqual([100, 50, 25]);
    expect(
      gradientAt(
        [
          [0, [0, 0, 0]],
          [1, [200, 100, 50]],
        ],
        7,
      ),
    ).toEqual([200, 100, 50]);
  });
});
