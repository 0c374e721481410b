/**
 * A scenario run's result as a table and a chart series (pure, vitest-covered).
 *
 * Tables: the API's `rows` ([label, value] pairs from the kind's `rows()`) when the
 * run carries them; a collective's per-size table (size, best algorithm, time,
 * algbw, busbw); a what-if's totals side by side (baseline, what if, difference) then
 * its most changed jobs; else the result flattened to (quantity, value) rows.
 * Charts: the kind's hint (`{"x": "size_bytes", "y": "busbw_gbps", "log_x": true}`)
 * picks the first array of objects in the result that has both keys — the best
 * value per x — plus one series per entry of a nested map that also has `y`
 * (a collective's `algorithms`), x sorted ascending.
 */
import { formatBytes, formatNumber, formatSeconds } from "./format";
import type { ChartHint } from "./scenarioform";

export interface Table {
  columns: string[];
  rows: string[][];
  /** Raw x value per row when the table follows the chart's x (data-x on <tr>). */
  keys?: (number | string)[];
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** A cell's text: numbers to ~4 significant figures, lists joined (shortened), objects as JSON. */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") return formatNumber(value, 4);
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const items: unknown[] = value;
    if (items.every((v) => !isObj(v) && !Array.isArray(v))) {
      const shown = items.length > 12 ? [...items.slice(0, 6), "…", ...items.slice(-5)] : items;
      return shown.map((v) => (v === "…" ? "…" : cell(v))).join(", ");
    }
    return `${items.length} items`;
  }
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

/** Rows of the API (`[[label, value], ...]` or `[{label, value}]`), if usable. */
function serverRows(rows: unknown): string[][] | null {
  if (!Array.isArray(rows) || rows.length === 0) return null;
  const out: string[][] = [];
  for (const r of rows) {
    if (Array.isArray(r) && r.length >= 2) out.push([String(r[0]), cell(r[1])]);
    else if (isObj(r) && "label" in r) out.push([String(r.label), cell(r.value)]);
    else return null;
  }
  return out;
}

/**
 * The result as (dotted key, value) rows: objects are walked down to `maxDepth`
 * levels ("latency_ns.average"), nulls inside objects are left out, lists of
 * numbers shortened, lists of objects counted; deeper objects become JSON.
 */
export function flattenResult(result: Obj, skip: ReadonlySet<string> = new Set(), maxDepth = 3): string[][] {
  const rows: string[][] = [];
  const walk = (value: unknown, key: string, depth: number): void => {
    if (isObj(value) && depth < maxDepth && Object.keys(value).length) {
      for (const [k, v] of Object.entries(value)) {
        if (v !== null && v !== undefined) walk(v, `${key}.${k}`, depth + 1);
      }
      return;
    }
    rows.push([key, cell(value)]);
  };
  for (const [key, value] of Object.entries(result)) {
    if (!skip.has(key)) walk(value, key, 1);
  }
  return rows;
}

function collectiveTable(result: Obj): Table | null {
  const sizes = result.sizes;
  if (!Array.isArray(sizes) || !sizes.every(isObj) || sizes.length === 0) return null;
  const sorted = [...sizes].sort((a, b) => (num(a.size_bytes) ?? 0) - (num(b.size_bytes) ?? 0));
  return {
    columns: ["message size", "algorithm", "time", "algbw (Gb/s)", "busbw (Gb/s)"],
    rows: sorted.map((r) => [
      formatBytes(num(r.size_bytes)),
      cell(r.algorithm),
      formatSeconds(num(r.time_s)),
      formatNumber(num(r.algbw_gbps), 4),
      formatNumber(num(r.busbw_gbps), 4),
    ]),
    keys: sorted.map((r) => num(r.size_bytes) ?? 0),
  };
}

const WHATIF_TOTALS: [string, string][] = [
  ["energy_mwh", "energy (MWh)"],
  ["mean_power_kw", "mean power (kW)"],
  ["peak_power_kw", "peak power (kW)"],
  ["peak_rack_kw", "peak rack (kW)"],
  ["peak_feed_kw", "peak feed (kW)"],
  ["utilisation", "utilisation"],
  ["availability", "availability"],
  ["lost_card_hours", "lost card-hours"],
  ["queue_wait_mean_s", "queue wait, mean (s)"],
  ["queue_wait_p90_s", "queue wait, p90 (s)"],
  ["waiting_jobs_mean", "waiting jobs, mean"],
  ["queued_cards_mean", "queued cards, mean"],
  ["plant_throttled_racks", "racks throttled by the plant"],
  ["plant_out_racks", "racks taken out by the plant"],
  ["feed_out_racks", "racks unpowered by the power chain"],
  ["feed_jobs_hit", "jobs stopped by the power chain"],
];

/** A what-if: each total in both cases and the difference, then the most changed jobs. */
export function whatifTable(result: Obj): Table | null {
  const b = isObj(result.baseline) && isObj(result.baseline.totals) ? result.baseline.totals : null;
  const p = isObj(result.perturbed) && isObj(result.perturbed.totals) ? result.perturbed.totals : null;
  if (!b || !p) return null;
  const rows = WHATIF_TOTALS.filter(([k]) => k in b).map(([k, label]) => {
    const [x, y] = [num(b[k]), num(p[k])];
    const d = x !== null && y !== null ? y - x : null;
    return [label, cell(x), cell(y), d === null ? "—" : `${d > 0 ? "+" : ""}${formatNumber(d, 4)}`];
  });
  const jobs = isObj(result.jobs) && Array.isArray(result.jobs.rows) ? result.jobs.rows : [];
  for (const r of jobs.filter(isObj).slice(0, 10)) {
    const delay = num(r.delay_s);
    rows.push([
      `job ${cell(r.job)} completes (s)`,
      cell(r.baseline_completion_s ?? "—"),
      cell(r.completion_s ?? "—"),
      delay === null ? "—" : `${delay > 0 ? "+" : ""}${formatNumber(delay, 4)}`,
    ]);
  }
  return { columns: ["quantity", "baseline", "what if", "difference"], rows };
}

/** The table of a finished run (see the module docstring for the order of preference). */
export function resultTable(kind: string, result: unknown, rows?: unknown): Table {
  if (!isObj(result)) {
    return { columns: ["result"], rows: [[cell(result)]] };
  }
  if (kind === "collective") {
    const t = collectiveTable(result);
    if (t) return t;
  }
  if (kind === "whatif") {
    const t = whatifTable(result);
    if (t) return t;
  }
  const fromServer = serverRows(rows);
  if (fromServer) return { columns: ["quantity", "value"], rows: fromServer };
  // "cluster" (what the run was converted from) and "timings_s" are bookkeeping.
  const skip = new Set(["cluster", "timings_s", ...(kind === "collective" ? ["points", "best"] : [])]);
  return { columns: ["quantity", "value"], rows: flattenResult(result, skip) };
}

export interface ChartSeries {
  label: string;
  y: (number | null)[];
}

export interface ChartData {
  x: number[];
  series: ChartSeries[];
  logX: boolean;
  logY: boolean;
  xKey: string;
  yKey: string;
  xLabel: string;
  yLabel: string;
}

/** The chart of a run's result following the kind's hint, or null if nothing fits. */
export function chartData(result: unknown, hint: ChartHint | null | undefined): ChartData | null {
  if (!hint || !isObj(result)) return null;
  const { x: xKey, y: yKey } = hint;
  const logX = Boolean(hint.log_x);
  const logY = Boolean(hint.log_y);
  const fits = (v: unknown): v is Obj[] =>
    Array.isArray(v) && v.length > 0 && v.every(isObj) && v.some((r) => num(r[xKey]) !== null && yKey in r);
  const named = hint.series ? result[hint.series] : undefined;
  const rowsOf = fits(named) ? named : Object.values(result).find(fits);
  if (!rowsOf) return null;
  const usable = (x: number | null): x is number => x !== null && (!logX || x > 0);
  const best = new Map<number, number | null>();
  const others = new Map<string, Map<number, number | null>>();
  for (const row of rowsOf) {
    const x = num(row[xKey]);
    if (!usable(x)) continue;
    best.set(x, num(row[yKey]));
    for (const nested of Object.values(row)) {
      if (!isObj(nested)) continue;
      for (const [name, inner] of Object.entries(nested)) {
        if (!isObj(inner) || !(yKey in inner)) continue;
        let m = others.get(name);
        if (!m) others.set(name, (m = new Map<number, number | null>()));
        m.set(x, num(inner[yKey]));
      }
    }
  }
  const xs = [...best.keys()].sort((a, b) => a - b);
  if (xs.length === 0) return null;
  const series: ChartSeries[] = [
    { label: others.size > 1 ? "best" : hint.y_label || axisLabel(yKey), y: xs.map((x) => best.get(x) ?? null) },
  ];
  // Per-algorithm curves only when there is more than one (else it repeats "best").
  if (others.size > 1) {
    for (const [name, m] of [...others.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
      series.push({ label: name, y: xs.map((x) => m.get(x) ?? null) });
    }
  }
  const clean = (y: number | null) => (y === null || (logY && y <= 0) ? null : y);
  for (const s of series) s.y = s.y.map(clean);
  return {
    x: xs,
    series,
    logX,
    logY,
    xKey,
    yKey,
    xLabel: hint.x_label || axisLabel(xKey),
    yLabel: hint.y_label || axisLabel(yKey),
  };
}

/** Axis label of a result key: "size_bytes" → "size (bytes)", "busbw_gbps" → "busbw (Gb/s)". */
export function axisLabel(key: string): string {
  const units: ReadonlyArray<readonly [string, string]> = [
    ["_bytes", "bytes"],
    ["_gbps", "Gb/s"],
    ["_GBps", "GB/s"],
    ["_ns", "ns"],
    ["_us", "µs"],
    ["_s", "s"],
  ];
  for (const [suffix, unit] of units) {
    if (key.endsWith(suffix)) return `${key.slice(0, -suffix.length).replaceAll("_", " ")} (${unit})`;
  }
  return key.replaceAll("_", " ");
}
