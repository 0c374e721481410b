/**
 * Colour scales of the 3D views: pure functions and lookup tables, no DOM, no three.js.
 *
 * Why a lookup table: a live frame recolours every instance of a view (512 cards
 * of a supernode, 26k racks of the million cluster) twice a second. Interpolating
 * colour stops and converting sRGB → linear per instance would cost far more
 * than the budget (< 5 ms for 512 cards), so each scale is compiled once into a
 * {@link Palette}: 256 steps of the gradient plus a few reserved entries (no
 * data, over budget, network rack, health categories), stored both as linear
 * floats (what three.js's `instanceColor` holds with colour management on) and
 * as "#rrggbb" strings (what the legend and `window.twin.colourOf` show). A
 * frame then maps each value to an integer *code* and copies three floats.
 */

/** An sRGB colour as 0–255 channels. */
export type RGB = readonly [number, number, number];

/** Number of gradient steps of a sequential palette (codes 0..255). */
export const LUT_SIZE = 256;
/** Reserved codes after the gradient. */
export const CODE_NO_DATA = LUT_SIZE;
export const CODE_OVER = LUT_SIZE + 1;
export const CODE_NETWORK = LUT_SIZE + 2;
/** First categorical code (health names follow in their order). */
export const CODE_CATEGORY = LUT_SIZE + 3;

/** Grey for "no reading": distinct from every gradient stop and from the background. */
export const NO_DATA_RGB: RGB = [0x5a, 0x61, 0x6d];
/** Over the rack budget: one unmistakable colour (as format.ts's OVER_BUDGET_COLOUR). */
export const OVER_RGB: RGB = [0xb0, 0x00, 0xb5];
/** A rack that holds no cards (network racks): no card metric applies. */
export const NETWORK_RGB: RGB = [0x3b, 0x5b, 0x8c];

/** The health codes the live frames carry (twin.telemetry.state.HEALTH_NAMES). */
export const HEALTH_NAMES = ["unknown", "ok", "warning", "critical", "stale"] as const;
const HEALTH_RGB: Record<string, RGB> = {
  unknown: NO_DATA_RGB,
  ok: [0x2e, 0xa0, 0x43],
  warning: [0xd2, 0x99, 0x22],
  critical: [0xe5, 0x39, 0x35],
  stale: [0x8b, 0x5c, 0xf6],
};

/** Green → amber → red: draw against a budget, temperatures, errors (high is bad). */
export const TRAFFIC: ReadonlyArray<readonly [number, RGB]> = [
  [0, [46, 160, 67]],
  [0.75, [210, 153, 34]],
  [1, [218, 54, 51]],
];
/** Blue → teal → green → yellow (viridis-like, brightened for a dark page): load. */
export const LOAD: ReadonlyArray<readonly [number, RGB]> = [
  [0, [44, 62, 158]],
  [0.35, [33, 145, 140]],
  [0.7, [94, 201, 98]],
  [1, [253, 231, 37]],
];
/** Blue → grey → red, grey at the middle: a difference centred on 0 (a what-if's racks). */
export const DIVERGING: ReadonlyArray<readonly [number, RGB]> = [
  [0, [76, 141, 255]],
  [0.5, [110, 118, 129]],
  [1, [218, 54, 51]],
];
/** Blue → green → yellow → red: temperatures. */
export const THERMAL: ReadonlyArray<readonly [number, RGB]> = [
  [0, [59, 130, 246]],
  [0.4, [34, 197, 94]],
  [0.7, [234, 179, 8]],
  [1, [239, 68, 68]],
];

export interface SequentialScale {
  kind: "sequential";
  metric: string;
  label: string;
  unit: string;
  /** Values mapped to the gradient's ends (clamped outside). */
  domain: [number, number];
  stops: ReadonlyArray<readonly [number, RGB]>;
  /** Values are divided by a per-instance budget first; above 1 → "over". */
  ratio: boolean;
  /** The domain follows the data (grown by frames, reset by a snapshot). */
  auto: boolean;
}

export interface CategoricalScale {
  kind: "categorical";
  metric: string;
  label: string;
  unit: string;
  names: readonly string[];
  /** Colours of categories 1..names.length (cycled); without them, the health colours. */
  colours?: ReadonlyArray<RGB>;
}

/** A categorical scale of `names` (category k = names[k-1]) in `colours`, cycled: jobs, tenants. */
export function categoriesScale(
  metric: MetricLike,
  names: readonly string[],
  colours: ReadonlyArray<RGB>,
): CategoricalScale {
  return { kind: "categorical", metric: metric.key, label: metric.label, unit: "", names, colours };
}

export type Scale = SequentialScale | CategoricalScale;

/** What a scale is built from: a metric of the hello message, or the "health" pseudo-metric. */
export interface MetricLike {
  key: string;
  label: string;
  unit: string;
}

/** The pseudo-metric that colours cards by their health code (card views only). */
export const HEALTH_METRIC: MetricLike = { key: "health", label: "Health", unit: "" };

/**
 * The scale of a metric in a view. The cluster view's power is the rack's draw
 * against its own budget (a ratio, with "over budget" marked); percentages use a
 * fixed 0–100 domain and temperatures 25–95 °C, so a colour means the same value
 * from one frame to the next; other units follow the data (`auto`).
 */
export function scaleFor(metric: MetricLike, view: "cluster" | "supernode" | "rack"): Scale {
  const base = { metric: metric.key, label: metric.label, unit: metric.unit };
  if (metric.key === "health") {
    return { kind: "categorical", ...base, unit: "", names: HEALTH_NAMES };
  }
  if (view === "cluster" && metric.key === "power_w") {
    return {
      kind: "sequential",
      ...base,
      label: "Rack power / budget",
      unit: "%",
      domain: [0, 1],
      stops: TRAFFIC,
      ratio: true,
      auto: false,
    };
  }
  if (metric.unit === "%") {
    return { kind: "sequential", ...base, domain: [0, 100], stops: LOAD, ratio: false, auto: false };
  }
  if (metric.unit === "°C") {
    return { kind: "sequential", ...base, domain: [25, 95], stops: THERMAL, ratio: false, auto: false };
  }
  const bad = /error|replay|latency|_s$|xid/.test(metric.key);
  const stops = bad || metric.unit === "W" ? TRAFFIC : LOAD;
  const start = AUTO_START[metric.unit] ?? [0, 1];
  return { kind: "sequential", ...base, domain: [start[0], start[1]], stops, ratio: false, auto: true };
}

/** Round up to a tidy legend end: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7 or 8 × a power of ten. */
export function niceCeil(value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) return 1;
  const exp = Math.floor(Math.log10(value));
  const base = 10 ** exp;
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 10]) {
    if (value <= m * base * (1 + 1e-9)) return Number((m * base).toPrecision(12));
  }
  return 10 * base;
}

/**
 * Domain for an `auto` scale from the current values: from 0 (or the minimum if
 * negative) to a tidy ceiling of the maximum; NaN is ignored; null without any
 * reading (the scale keeps the domain it has).
 */
export function autoDomain(values: ArrayLike<number>): [number, number] | null {
  let lo = 0;
  let hi = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v !== v) continue;
    if (v > hi) hi = v;
    if (v < lo) lo = v;
  }
  if (hi === Number.NEGATIVE_INFINITY) return null;
  return [lo < 0 ? -niceCeil(-lo) : 0, niceCeil(hi)];
}

/** Starting domain of an `auto` scale before any reading, by unit. */
const AUTO_START: Record<string, [number, number]> = {
  W: [0, 1000],
  GiB: [0, 80],
  "GB/s": [0, 100],
  MHz: [0, 2000],
  ns: [0, 500],
  µs: [0, 1000],
  s: [0, 20],
};

/** sRGB channel (0–255) → linear light (0–1), the IEC 61966-2-1 curve three.js uses. */
export function srgbToLinear(channel: number): number {
  const c = channel / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
}

export function hex(rgb: RGB): string {
  return `#${rgb.map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}

/** The gradient's colour at t ∈ [0, 1] (clamped), linear between stops in sRGB. */
export function gradientAt(stops: ReadonlyArray<readonly [number, RGB]>, t: number): RGB {
  const u = t <= 0 ? 0 : t >= 1 ? 1 : t;
  for (let i = 1; i < stops.length; i++) {
    const [t1, c1] = stops[i];
    if (u <= t1) {
      const [t0, c0] = stops[i - 1];
      const f = t1 === t0 ? 1 : (u - t0) / (t1 - t0);
      return [c0[0] + (c1[0] - c0[0]) * f, c0[1] + (c1[1] - c0[1]) * f, c0[2] + (c1[2] - c0[2]) * f];
    }
  }
  return stops[stops.length - 1][1];
}

/** A compiled scale: every code's colour as linear floats and as "#rrggbb". */
export interface Palette {
  scale: Scale;
  /** Linear RGB triplets, indexed by code × 3. */
  linear: Float32Array;
  /** "#rrggbb" per code. */
  hex: string[];
  /** Code of a value (NaN → no data). `budget` only for ratio scales. */
  code: (value: number, budget?: number) => number;
}

const RESERVED: Array<[number, RGB]> = [
  [CODE_NO_DATA, NO_DATA_RGB],
  [CODE_OVER, OVER_RGB],
  [CODE_NETWORK, NETWORK_RGB],
];

/** Build the lookup tables of a scale (a few µs; do it per scale change, not per frame). */
export function compile(scale: Scale): Palette {
  const own = scale.kind === "categorical" && scale.colours && scale.colours.length ? scale.colours : null;
  const categories = own && scale.kind === "categorical" ? scale.names.length : 0;
  const n = CODE_CATEGORY + Math.max(HEALTH_NAMES.length, categories + 1);
  const linear = new Float32Array(n * 3);
  const hexes: string[] = new Array<string>(n);
  const put = (code: number, rgb: RGB): void => {
    const r = rgb.map((v) => Math.round(v)) as unknown as RGB;
    linear[code * 3] = srgbToLinear(r[0]);
    linear[code * 3 + 1] = srgbToLinear(r[1]);
    linear[code * 3 + 2] = srgbToLinear(r[2]);
    hexes[code] = hex(r);
  };
  const stops = scale.kind === "sequential" ? scale.stops : TRAFFIC;
  for (let i = 0; i < LUT_SIZE; i++) put(i, gradientAt(stops, i / (LUT_SIZE - 1)));
  for (const [code, rgb] of RESERVED) put(code, rgb);
  HEALTH_NAMES.forEach((name, k) => put(CODE_CATEGORY + k, HEALTH_RGB[name]));
  if (own) for (let k = 1; k <= categories; k++) put(CODE_CATEGORY + k, own[(k - 1) % own.length]);

  let code: (value: number, budget?: number) => number;
  if (own) {
    code = (value) => {
      if (value !== value) return CODE_NO_DATA;
      const k = Math.round(value);
      return k >= 1 && k <= categories ? CODE_CATEGORY + k : CODE_NO_DATA;
    };
  } else if (scale.kind === "categorical") {
    code = (value) => {
      if (value !== value) return CODE_NO_DATA;
      const k = Math.round(value);
      if (k <= 0 || k >= HEALTH_NAMES.length) return CODE_NO_DATA; // 0 = unknown
      return CODE_CATEGORY + k;
    };
  } else {
    const [lo, hi] = scale.domain;
    const span = hi - lo || 1;
    const top = LUT_SIZE - 1;
    if (scale.ratio) {
      code = (value, budget) => {
        if (value !== value || !(budget !== undefined && budget > 0)) return CODE_NO_DATA;
        const u = value / budget;
        if (u > 1) return CODE_OVER;
        const t = (u - lo) / span;
        return t <= 0 ? 0 : t >= 1 ? top : Math.round(t * top);
      };
    } else {
      code = (value) => {
        if (value !== value) return CODE_NO_DATA;
        const t = (value - lo) / span;
        return t <= 0 ? 0 : t >= 1 ? top : Math.round(t * top);
      };
    }
  }
  return { scale, linear, hex: hexes, code };
}

/**
 * Write the colour of each instance into `out` (an `instanceColor` array, 3
 * floats per instance) from its value; `codes` keeps the code per instance
 * (so `colourOf` is exact). `fixed[i] >= 0` forces a code (network racks).
 */
export function paint(
  palette: Palette,
  values: ArrayLike<number>,
  out: Float32Array,
  codes: Uint16Array,
  budgets?: ArrayLike<number>,
  fixed?: Int16Array,
): void {
  const lin = palette.linear;
  const code = palette.code;
  const n = values.length;
  for (let i = 0; i < n; i++) {
    const f = fixed ? fixed[i] : -1;
    const c = f >= 0 ? f : budgets ? code(values[i], budgets[i]) : code(values[i]);
    codes[i] = c;
    const j = i * 3;
    const k = c * 3;
    out[j] = lin[k];
    out[j + 1] = lin[k + 1];
    out[j + 2] = lin[k + 2];
  }
}

export interface LegendStop {
  /** Position along the bar, 0–1. */
  offset: number;
  colour: string;
}

export interface Legend {
  title: string;
  /** Gradient stops (empty for a categorical scale). */
  gradient: LegendStop[];
  /** Tick labels under the bar: [offset, text]. */
  ticks: Array<[number, string]>;
  /** Extra swatches: "no data" always, plus over-budget / network / health names. */
  swatches: Array<{ label: string; colour: string }>;
}

function tickText(value: number, unit: string): string {
  const abs = Math.abs(value);
  const text =
    abs >= 1e6
      ? `${+(value / 1e6).toPrecision(3)}M`
      : abs >= 1e4
        ? `${+(value / 1e3).toPrecision(3)}k`
        : `${+value.toPrecision(3)}`;
  return unit ? `${text} ${unit}` : text;
}

/** What the legend shows for a palette: gradient stops, ticks and swatches. */
export function legendOf(palette: Palette, withNetwork = false): Legend {
  const scale = palette.scale;
  const swatches: Legend["swatches"] = [];
  if (scale.kind === "categorical" && scale.colours && scale.colours.length) {
    scale.names.forEach((name, i) => swatches.push({ label: name, colour: palette.hex[CODE_CATEGORY + i + 1] }));
    swatches.push({ label: "free", colour: palette.hex[CODE_NO_DATA] });
    return { title: scale.label, gradient: [], ticks: [], swatches };
  }
  if (scale.kind === "categorical") {
    HEALTH_NAMES.forEach((name, k) => {
      if (k > 0) swatches.push({ label: name, colour: palette.hex[CODE_CATEGORY + k] });
    });
    swatches.push({ label: "no data", colour: palette.hex[CODE_NO_DATA] });
    return { title: scale.label, gradient: [], ticks: [], swatches };
  }
  const gradient = scale.stops.map(([t, rgb]) => ({ offset: t, colour: hex(rgb.map(Math.round) as unknown as RGB) }));
  const [lo, hi] = scale.domain;
  const ticks: Array<[number, string]> = scale.ratio
    ? [
        [0, "0 %"],
        [0.5, "50 %"],
        [0.75, "75 %"],
        [1, "100 %"],
      ]
    : [
        [0, tickText(lo, scale.unit)],
        [0.5, tickText((lo + hi) / 2, scale.unit)],
        [1, tickText(hi, scale.unit)],
      ];
  if (scale.ratio) swatches.push({ label: "over budget", colour: palette.hex[CODE_OVER] });
  if (withNetwork) swatches.push({ label: "network rack", colour: palette.hex[CODE_NETWORK] });
  swatches.push({ label: "no data", colour: palette.hex[CODE_NO_DATA] });
  return {
    title: scale.ratio ? scale.label : `${scale.label}${scale.unit ? ` (${scale.unit})` : ""}`,
    gradient,
    ticks,
    swatches,
  };
}

/** CSS `linear-gradient(...)` for a legend's bar. */
export function cssGradient(legend: Legend): string {
  return `linear-gradient(to right, ${legend.gradient
    .map((s) => `${s.colour} ${(s.offset * 100).toFixed(1)}%`)
    .join(", ")})`;
}
