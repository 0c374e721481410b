/**
 * Pure formatting helpers of the panels (no DOM), covered by vitest: live metric
 * values with their units, sizes in bytes, durations, the route summary line.
 */

/** `value` with about three significant figures and thousands separators. */
export function formatNumber(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  const abs = Math.abs(value);
  if (abs === 0) return "0";
  if (abs >= 10 ** digits) return Math.round(value).toLocaleString("en-US");
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  if (abs < 1e-3) return value.toExponential(2);
  const rounded = Number(value.toPrecision(digits)); // drops trailing zeros: "71.50" → 71.5
  return Math.abs(rounded) >= 1000 ? Math.round(rounded).toLocaleString("en-US") : String(rounded);
}

/** Units shown without a space or not at all. */
const BARE_UNITS = new Set(["", "code", "count"]);

/**
 * A live metric value with its unit: (71.46, "°C") → "71.5 °C", (655, "W") → "655 W",
 * (3, "count") → "3", null → "—".
 */
export function formatMetric(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  const text = formatNumber(value);
  return BARE_UNITS.has(unit) ? text : `${text} ${unit}`;
}

/** Binary sizes as message sizes are written: 1024 → "1 KiB", 1048576 → "1 MiB", 100 → "100 B". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${formatNumber(v)} ${units[i]}`;
}

/** Nanoseconds readable at any scale: 850 → "850 ns", 12_500 → "12.5 µs", 3.2e6 → "3.2 ms". */
export function formatNs(ns: number | null | undefined): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return "—";
  const abs = Math.abs(ns);
  if (abs >= 1e9) return `${formatNumber(ns / 1e9)} s`;
  if (abs >= 1e6) return `${formatNumber(ns / 1e6)} ms`;
  if (abs >= 1e4) return `${formatNumber(ns / 1e3)} µs`;
  return `${formatNumber(ns)} ns`;
}

/** Seconds → "79.2 ns", "19.7 µs", "420 ms", "3.2 s", "2 min 5 s", "1 h 4 min". */
export function formatSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s)) return "—";
  if (s === 0) return "0 s";
  if (s < 1e-6) return `${formatNumber(s * 1e9)} ns`;
  if (s < 1e-3) return `${formatNumber(s * 1e6)} µs`;
  if (s < 1) return `${formatNumber(s * 1000)} ms`;
  if (s < 60) return `${formatNumber(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/** Gb/s: 400 → "400 Gb/s", 1600 → "1.6 Tb/s". */
export function formatGbps(gbps: number | null | undefined): string {
  if (gbps === null || gbps === undefined || !Number.isFinite(gbps)) return "—";
  return Math.abs(gbps) >= 1000 ? `${formatNumber(gbps / 1000)} Tb/s` : `${formatNumber(gbps)} Gb/s`;
}

/** How long ago an ISO time was, relative to `now` (ms): "5 s ago", "3 min ago", "2 h ago". */
export function formatAgo(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return "—";
  const s = Math.max(0, (now - t) / 1000);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export interface RouteSummaryInput {
  reachable: boolean;
  hops: number;
  latency_ns: number | null;
  bottleneck_gbps: number | null;
}

/**
 * The route result line: "3 hops · 1,234 ns · bottleneck 400 Gb/s" (the contract's
 * "N hops · X ns"; latency always in ns so it compares with the API's latency_ns),
 * or "unreachable" when the two cards are not connected.
 */
export function routeSummary(route: RouteSummaryInput): string {
  if (!route.reachable) return "unreachable: no path between the two cards";
  const parts = [`${route.hops} ${route.hops === 1 ? "hop" : "hops"}`];
  if (route.latency_ns !== null && Number.isFinite(route.latency_ns)) {
    parts.push(`${formatNumber(route.latency_ns, 4)} ns`);
  }
  if (route.bottleneck_gbps !== null && Number.isFinite(route.bottleneck_gbps)) {
    parts.push(`bottleneck ${formatNumber(route.bottleneck_gbps)} Gb/s`);
  }
  return parts.join(" · ");
}

/** A card reference typed by the user: digits are an id, anything else a serial. */
export function parseCardRef(text: string): number | string | null {
  const t = text.trim();
  if (t === "") return null;
  if (/^\d+$/.test(t)) return Number.parseInt(t, 10);
  return t;
}
