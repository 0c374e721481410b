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

/**
 * Alerts grouped by rule, severity and place (a rack, or a supernode): a rack of
 * 40 cards dropping utilisation is one group of 40. The server's groups
 * (GET /api/telemetry/alerts/groups/, twin/telemetry/grouping.py) give the counts of
 * every open alert; the alerts held locally (the newest `cap`) are each group's
 * members, shown when it is expanded; ws events keep both current.
 */
export type GroupBy = "rack" | "supernode";

export interface ServerAlertGroup {
  rule: string;
  severity: string;
  scope: string;
  rack: number | null;
  rack_name: string | null;
  supernode: number | null;
  supernode_name: string | null;
  count: number;
  newest: string;
  message: string;
}

export interface AlertGroup {
  key: string;
  rule: string;
  severity: string;
  scope: "rack" | "supernode" | "cluster";
  /** The rack or supernode id (null: cluster-wide). */
  place: number | null;
  placeName: string | null;
  /** Open alerts in the group (may exceed `members`). */
  count: number;
  /** Start of its newest alert (ISO 8601). */
  newest: string | null;
  message: string;
  /** The group's alerts held locally, newest first. */
  members: AlertPayload[];
}

function placeOf(a: Pick<AlertPayload, "rack" | "supernode">, by: GroupBy): number | null {
  const place = by === "rack" ? a.rack : a.supernode;
  return typeof place === "number" ? place : null;
}

export function groupKey(
  a: Pick<AlertPayload, "rule" | "severity" | "rack" | "supernode">,
  by: GroupBy = "rack",
): string {
  return `${a.rule}|${a.severity}|${placeOf(a, by) ?? ""}`;
}

function newer(a: string | null, b: string | null): string | null {
  if (!a) return b;
  if (!b) return a;
  return Date.parse(a) >= Date.parse(b) ? a : b;
}

function groupOf(a: AlertPayload, by: GroupBy): AlertGroup {
  const place = placeOf(a, by);
  return {
    key: groupKey(a, by),
    rule: a.rule,
    severity: a.severity,
    scope: place === null ? "cluster" : by,
    place,
    placeName: null,
    count: 0,
    newest: null,
    message: "",
    members: [],
  };
}

function addMember(g: AlertGroup, a: AlertPayload): boolean {
  const i = g.members.findIndex((m) => m.id === a.id);
  if (i >= 0) {
    g.members[i] = { ...g.members[i], ...a };
    return false;
  }
  g.members.push(a);
  g.members.sort(compareAlerts);
  g.newest = newer(g.newest, a.started);
  if (g.newest === a.started || !g.message) g.message = a.message ?? g.message;
  return true;
}

/** Most severe first, then the largest, then the newest. */
export function compareGroups(a: AlertGroup, b: AlertGroup): number {
  const rank = (s: string) => SEVERITY_RANK[s] ?? 9;
  return (
    rank(a.severity) - rank(b.severity) ||
    b.count - a.count ||
    (b.newest ? Date.parse(b.newest) : 0) - (a.newest ? Date.parse(a.newest) : 0) ||
    a.key.localeCompare(b.key)
  );
}

/** The groups of a fresh load: the server's counts, the local alerts as members. */
export function buildGroups(
  server: ReadonlyArray<ServerAlertGroup>,
  alerts: ReadonlyArray<AlertPayload>,
  by: GroupBy = "rack",
): AlertGroup[] {
  const groups = new Map<string, AlertGroup>();
  for (const s of server) {
    const place = by === "rack" ? s.rack : s.supernode;
    const key = `${s.rule}|${s.severity}|${place ?? ""}`;
    groups.set(key, {
      key,
      rule: s.rule,
      severity: s.severity,
      scope: place === null ? "cluster" : by,
      place,
      placeName: (by === "rack" ? s.rack_name : s.supernode_name) ?? null,
      count: s.count,
      newest: s.newest,
      message: s.message,
      members: [],
    });
  }
  for (const a of alerts) {
    if (a.ended) continue;
    const key = groupKey(a, by);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = groupOf(a, by)));
    addMember(g, a);
    g.count = Math.max(g.count, g.members.length);
  }
  return [...groups.values()].sort(compareGroups);
}

/**
 * Apply ws events in order: "opened" adds a member and counts it, "acknowledged"
 * updates a member, "closed" (or an ended alert) removes it and uncounts it; a
 * group whose count reaches 0 goes. Returns new groups; `groups` is not modified.
 * `memberCap` bounds the members held per group (the count still counts all).
 */
export function applyGroupEvents(
  groups: ReadonlyArray<AlertGroup>,
  events: ReadonlyArray<AlertEvent>,
  by: GroupBy = "rack",
  memberCap = DEFAULT_ALERT_CAP,
): AlertGroup[] {
  const map = new Map(groups.map((g) => [g.key, { ...g, members: [...g.members] }]));
  for (const { event, alert } of events) {
    if (!alert || typeof alert.id !== "number") continue;
    const key = groupKey(alert, by);
    let g = map.get(key);
    if (event === "closed" || alert.ended) {
      if (!g) continue;
      g.members = g.members.filter((m) => m.id !== alert.id);
      g.count -= 1;
      if (g.count <= 0) map.delete(key);
    } else if (event === "opened" || event === "acknowledged") {
      if (!g) {
        if (event === "acknowledged") continue; // an alert of a group not held: nothing to update
        map.set(key, (g = groupOf(alert, by)));
      }
      const added = addMember(g, alert);
      if (added && event === "opened") g.count += 1;
      else if (added) g.count = Math.max(g.count, g.members.length);
      if (g.members.length > memberCap) g.members.length = memberCap;
    }
  }
  return [...map.values()].sort(compareGroups);
}

/** "rack r12", "supernode sn3" or "cluster" (an id when the name is not known). */
export function groupPlace(g: AlertGroup): string {
  if (g.scope === "cluster" || g.place === null) return "cluster";
  return `${g.scope} ${g.placeName ?? `#${g.place}`}`;
}

/** Open alerts per severity over all groups (for the list's header). */
export function groupSeverityCounts(groups: ReadonlyArray<AlertGroup>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const g of groups) out[g.severity] = (out[g.severity] ?? 0) + g.count;
  return out;
}
