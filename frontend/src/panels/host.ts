/**
 * The interface between the side panels (this folder) and the page that mounts them
 * (main.ts / the three.js scene). The panels only talk to the page through a PanelHost,
 * so they can be mounted, tested and reused without the scene.
 *
 * Route ends: the card panel's "Route from here" / "Route to here" buttons call
 * `onRouteEnd(which, cardId)` when the page passes it in the side panel's mount options
 * (`mountSidePanel(el, host, { onRouteEnd })`); otherwise they dispatch a CustomEvent
 * `"twin:route-end"` on `document` with `detail: { which, cardId }` (a RouteEndDetail).
 * Either way the page forwards it to the route panel's `setEnd(which, cardId)`.
 */
import type { Alert, Api, Metric, Route } from "../api";

export type ObjectKind = "card" | "rack" | "link" | "supernode";
export interface Selection {
  kind: ObjectKind;
  id: number;
}
/** A metric as the live stream's hello lists it (with how a view aggregates it), or the REST list. */
export type MetricInfo = Pick<Metric, "key" | "label" | "unit"> & { aggregate?: string };

/**
 * An alert as the ws `alerts` message carries it (twin.telemetry.models.Alert.as_event):
 * the REST Alert's fields but its url, cluster, peak, active flag and acknowledgement time.
 */
export type AlertPayload = Pick<Alert, "id" | "rule" | "severity" | "card" | "rack" | "message" | "ended"> &
  Partial<Pick<Alert, "level" | "subject" | "supernode" | "value" | "threshold">> & {
    /** ISO 8601. */
    started: string | null;
    acknowledged_by?: string | null;
  };
/**
 * One entry of a ws `alerts` message: `{"type": "alerts", "events": AlertEvent[], "dropped": n}`
 * (twin/live/consumers.py). `event` is "opened" | "closed" | "acknowledged".
 */
export interface AlertEvent {
  event: string;
  alert: AlertPayload;
}

export type RouteEnd = "src" | "dst";
/** `detail` of the "twin:route-end" CustomEvent (when no onRouteEnd callback is given). */
export interface RouteEndDetail {
  which: RouteEnd;
  cardId: number;
}
export const ROUTE_END_EVENT = "twin:route-end";

export interface PanelHost {
  api: Api;
  clusterId(): number;
  metrics(): MetricInfo[];
  select(sel: Selection, opts?: { fly?: boolean }): Promise<void>; // the scene implements: switch view, fly camera, open the side panel (calls your show)
  showRoute(route: Route | null): Promise<void>; // the scene implements: highlight
  /** Optional: the metric selected in the page (the card panel's sparkline follows it);
   *  without it the panels read `window.twin.view.metric`, else use gpu_util. */
  metric?(): string;
  /** Optional: colour the floor's racks by these shares (rack id → 0..1, a scheduling run's
   *  playback) with `label` as the legend's title; null gives the live colours back. */
  showPlayback?(shares: ReadonlyMap<number, number> | null, label: string): void;
  /** Optional: colour the floor's racks by a what-if's difference (rack id → kW) on a
   *  diverging scale −span … +span; null gives the live colours back. */
  showDifference?(values: ReadonlyMap<number, number> | null, label: string, span: number): void;
}
