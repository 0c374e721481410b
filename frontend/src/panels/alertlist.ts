/**
 * The live alert list as a pure value: the REST list seeds it, ws events
 * (opened / acknowledged / closed) update it. Kept newest first (by `started`,
 * then id) and capped, so a storm of alerts cannot grow the DOM without bound.
 */
import type { AlertEvent, AlertPayload } from "./host";

export const DEFAULT_ALERT_CAP = 200;

export const SEVERITY_RANK: Readonly<Record<string, number>> = { critical: 0, warning: 1, info: 2 };

function startedMs(a: AlertPayload): number {
  const t = a.started ? Date.parse(a.started) : Number.NaN;
  return Number.isFinite(t) ? t : 0;
}

/** Newest first; equal start times: higher id (created later) first. */
export function compareAlerts(a: AlertPayload, b: AlertPayload): number {
  return startedMs(b) - startedMs(a) || b.id - a.id;
}

/** Sort, drop ended ones and duplicates (the later entry of an id wins), cap. */
export function normalise(alerts: ReadonlyArray<AlertPayload>, cap = DEFAULT_ALERT_CAP): AlertPayload[] {
  const byId = new Map<number, AlertPayload>();
  for (const a of alerts) {
    if (a.ended) byId.delete(a.id);
    else byId.set(a.id, a);
  }
  return [...byId.values()].sort(compareAlerts).slice(0, Math.max(0, cap));
}

/**
 * Apply ws events in order to the active list: "opened" adds (or replaces),
 * "acknowledged" replaces an alert it holds (or adds it if still active, as the
 * cap may have pushed it out), "closed" — or any event whose alert has ended — removes.
 * Unknown events are ignored. Returns a new array; `list` is not modified.
 */
export function mergeAlerts(
  list: ReadonlyArray<AlertPayload>,
  events: ReadonlyArray<AlertEvent>,
  cap = DEFAULT_ALERT_CAP,
): AlertPayload[] {
  const byId = new Map<number, AlertPayload>(list.map((a) => [a.id, a]));
  for (const { event, alert } of events) {
    if (!alert || typeof alert.id !== "number") continue;
    if (event === "closed" || alert.ended) {
      byId.delete(alert.id);
    } else if (event === "opened" || event === "acknowledged") {
      byId.set(alert.id, { ...byId.get(alert.id), ...alert });
    }
  }
  return [...byId.values()].sort(compareAlerts).slice(0, Math.max(0, cap));
}

/** What a click on an alert should select: its card, else its rack, else nothing. */
export function alertTarget(a: AlertPayload): { kind: "card" | "rack"; id: number } | null {
  if (typeof a.card === "number") return { kind: "card", id: a.card };
  if (typeof a.rack === "number") return { kind: "rack", id: a.rack };
  return null;
}

/** Counts per severity, for the list's header. */
export function severityCounts(list: ReadonlyArray<AlertPayload>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of list) out[a.severity] = (out[a.severity] ?? 0) + 1;
  return out;
}
