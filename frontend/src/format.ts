/**
 * Pure formatting and colour helpers for the dashboard (no DOM, no fetch), so
 * vitest can cover them exactly.
 *
 * Power figures arrive from the API in watts. The seeds' racks are budgeted at
 * 40 kW, so rack utilisation (draw / budget) is the number operators watch:
 * the colour scale runs green → amber → red up to the budget, and anything
 * over it gets one unmistakable colour rather than a deeper red.
 */
import { config } from "./config";

/** Budget of a rack created without one, in watts (the server's twin.hardware.constants). */
export const DEFAULT_RACK_BUDGET_W: number = config().rack_budget_default_w;

const UNITS: ReadonlyArray<readonly [number, string]> = [
  [1e9, "GW"],
  [1e6, "MW"],
  [1e3, "kW"],
];

/** Format a whole count with thousands separators: 1048576 → "1,048,576". */
export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return "—";
  }
  return Math.round(value).toLocaleString("en-US");
}

/**
 * Format a power in watts with the largest unit that keeps it ≥ 1, and three
 * significant figures: 850 → "850 W", 38_400 → "38.4 kW", 3_620_000 → "3.62 MW".
 */
export function formatPower(watts: number | null | undefined): string {
  if (watts === null || watts === undefined || !Number.isFinite(watts)) {
    return "—";
  }
  const sign = watts < 0 ? "-" : "";
  const abs = Math.abs(watts);
  for (const [scale, unit] of UNITS) {
    if (abs >= scale) {
      return `${sign}${significant(abs / scale)} ${unit}`;
    }
  }
  return `${sign}${Math.round(abs)} W`;
}

/** Three significant figures without trailing zeros beyond what is meaningful. */
function significant(value: number): string {
  // Rounding can carry into a new digit (999.6 → 1000); toPrecision handles that.
  const text = value.toPrecision(3);
  return text.includes("e") ? String(Number(text)) : text;
}

/** Format a fraction as a percentage: 0.9123 → "91.2 %". */
export function formatPercent(fraction: number | null | undefined, digits = 1): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) {
    return "—";
  }
  return `${(fraction * 100).toFixed(digits)} %`;
}

export type UtilisationLevel = "idle" | "ok" | "high" | "over";

/**
 * Classify a rack's draw against its budget: over the budget is "over" (the
 * builder and the model refuse it, so seeing it means an edit went wrong);
 * above 90 % is "high"; an empty rack is "idle".
 */
export function utilisationLevel(drawW: number, budgetW = DEFAULT_RACK_BUDGET_W): UtilisationLevel {
  if (!(budgetW > 0)) {
    throw new RangeError(`rack budget must be positive, got ${budgetW}`);
  }
  if (drawW <= 0) return "idle";
  const u = drawW / budgetW;
  if (u > 1) return "over";
  if (u > 0.9) return "high";
  return "ok";
}

export const OVER_BUDGET_COLOUR = "#b000b5";
const IDLE_COLOUR = "#3a4150";

/** Colour stops from 0 % to 100 % of the budget: green, amber, red. */
const STOPS: ReadonlyArray<readonly [number, readonly [number, number, number]]> = [
  [0, [46, 160, 67]],
  [0.75, [210, 153, 34]],
  [1, [218, 54, 51]],
];

/**
 * Colour of a rack's utilisation as "#rrggbb": linear between the stops up to
 * the budget; {@link OVER_BUDGET_COLOUR} above it; grey for an empty rack.
 */
export function utilisationColour(drawW: number, budgetW = DEFAULT_RACK_BUDGET_W): string {
  const level = utilisationLevel(drawW, budgetW);
  if (level === "over") return OVER_BUDGET_COLOUR;
  if (level === "idle") return IDLE_COLOUR;
  const u = drawW / budgetW;
  for (let i = 1; i < STOPS.length; i++) {
    const [u1, c1] = STOPS[i];
    if (u <= u1) {
      const [u0, c0] = STOPS[i - 1];
      const t = (u - u0) / (u1 - u0);
      return hex(c0.map((v, k) => v + (c1[k] - v) * t));
    }
  }
  return hex(STOPS[STOPS.length - 1][1]);
}

function hex(rgb: ReadonlyArray<number>): string {
  return `#${rgb.map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}

/**
 * Format a live metric value with its unit: watts through {@link formatPower},
 * percentages and temperatures with one decimal, counts and codes whole,
 * others with three significant figures; null/NaN → "—".
 */
export function formatValue(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  switch (unit) {
    case "W":
      return formatPower(value);
    case "%":
      return `${value.toFixed(1)} %`;
    case "°C":
      return `${value.toFixed(1)} °C`;
    case "count":
    case "code":
      return formatCount(value);
    case "MHz":
      return `${Math.round(value).toLocaleString("en-US")} MHz`;
    case "":
      return String(Number(value.toPrecision(3)));
    default:
      return `${Math.abs(value) >= 1000 ? formatCount(value) : String(Number(value.toPrecision(3)))} ${unit}`;
  }
}
