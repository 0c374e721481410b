import { describe, expect, it } from "vitest";

import {
  DEFAULT_RACK_BUDGET_W,
  OVER_BUDGET_COLOUR,
  formatCount,
  formatPercent,
  formatPower,
  formatValue,
  utilisationColour,
  utilisationLevel,
} from "./format";

describe("formatCount", () => {
  it("groups thousands", () => {
    expect(formatCount(1_048_576)).toBe("1,048,576");
    expect(formatCount(512)).toBe("512");
    expect(formatCount(0)).toBe("0");
  });
  it("shows a dash for missing values", () => {
    expect(formatCount(null)).toBe("—");
    expect(formatCount(undefined)).toBe("—");
    expect(formatCount(Number.NaN)).toBe("—");
  });
});

describe("formatPower", () => {
  it("keeps watts below a kilowatt", () => {
    expect(formatPower(0)).toBe("0 W");
    expect(formatPower(700)).toBe("700 W");
    expect(formatPower(999.4)).toBe("999 W");
  });
  it("uses three significant figures in the largest unit", () => {
    expect(formatPower(38_400)).toBe("38.4 kW");
    expect(formatPower(40_000)).toBe("40.0 kW");
    // 512 H100s at 700 W: the seeds' supernode cannot fit one 40 kW rack.
    expect(formatPower(512 * 700)).toBe("358 kW");
    expect(formatPower(3_620_000)).toBe("3.62 MW");
    expect(formatPower(1_048_576 * 700)).toBe("734 MW");
    expect(formatPower(1.2e9)).toBe("1.20 GW");
  });
  it("carries a rounding into the next digit", () => {
    expect(formatPower(999_600)).toBe("1000 kW");
  });
  it("keeps the sign of a negative headroom", () => {
    expect(formatPower(-1_500)).toBe("-1.50 kW");
  });
  it("shows a dash for missing values", () => {
    expect(formatPower(null)).toBe("—");
    expect(formatPower(Number.POSITIVE_INFINITY)).toBe("—");
  });
});

describe("formatPercent", () => {
  it("formats fractions", () => {
    expect(formatPercent(0.9123)).toBe("91.2 %");
    expect(formatPercent(1)).toBe("100.0 %");
    expect(formatPercent(0.5, 0)).toBe("50 %");
    expect(formatPercent(undefined)).toBe("—");
  });
});

describe("utilisationLevel", () => {
  it("classifies draw against the 40 kW default", () => {
    expect(DEFAULT_RACK_BUDGET_W).toBe(40_000);
    expect(utilisationLevel(0)).toBe("idle");
    expect(utilisationLevel(20_000)).toBe("ok");
    expect(utilisationLevel(36_000)).toBe("ok");
    expect(utilisationLevel(36_001)).toBe("high");
    expect(utilisationLevel(40_000)).toBe("high");
    expect(utilisationLevel(40_001)).toBe("over");
  });
  it("honours a custom budget", () => {
    expect(utilisationLevel(20_000, 20_000)).toBe("high");
    expect(utilisationLevel(20_001, 20_000)).toBe("over");
  });
  it("refuses a budget that is not positive", () => {
    expect(() => utilisationLevel(1, 0)).toThrow(RangeError);
    expect(() => utilisationLevel(1, -5)).toThrow(/positive/);
  });
});

describe("utilisationColour", () => {
  it("runs green to amber to red up to the budget", () => {
    expect(utilisationColour(1)).toBe("#2ea043");
    expect(utilisationColour(30_000)).toBe("#d29922");
    expect(utilisationColour(40_000)).toBe("#da3633");
  });
  it("interpolates between stops", () => {
    // Halfway between amber (0.75) and red (1.0).
    expect(utilisationColour(35_000)).toBe("#d6682b");
  });
  it("marks an over-budget rack with its own colour", () => {
    expect(utilisationColour(40_001)).toBe(OVER_BUDGET_COLOUR);
    expect(utilisationColour(10_001, 10_000)).toBe(OVER_BUDGET_COLOUR);
  });
  it("greys out an empty rack", () => {
    expect(utilisationColour(0)).toBe("#3a4150");
  });
  it("always returns a #rrggbb colour", () => {
    for (let w = 0; w <= 50_000; w += 1_250) {
      expect(utilisationColour(w)).toMatch(/^#[0-9a-f]{6}$/);
    }
  });
});

describe("formatValue", () => {
  it("formats each unit the way operators read it", () => {
    expect(formatValue(655.3, "W")).toBe("655 W");
    expect(formatValue(38_400, "W")).toBe("38.4 kW");
    expect(formatValue(87.19, "%")).toBe("87.2 %");
    expect(formatValue(73.375, "°C")).toBe("73.4 °C");
    expect(formatValue(3, "count")).toBe("3");
    expect(formatValue(1410, "MHz")).toBe("1,410 MHz");
    expect(formatValue(61.25, "GiB")).toBe("61.3 GiB");
    expect(formatValue(1.234, "µs")).toBe("1.23 µs");
    expect(formatValue(12_345, "kJ")).toBe("12,345 kJ");
    expect(formatValue(2, "")).toBe("2");
    expect(formatValue(0.5, "GB/s")).toBe("0.5 GB/s");
  });
  it("shows a dash for no reading", () => {
    expect(formatValue(null, "W")).toBe("—");
    expect(formatValue(Number.NaN, "%")).toBe("—");
  });
});
