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
import type { Api } from "../api";

export type ObjectKind = "card" | "rack" | "link" | "supernode";
export interface Selection {
  kind: ObjectKind;
  id: number;
}
export interface MetricInfo {
  key: string;
  label: string;
  unit: string;
  aggregate?: string;
}
export interface RouteResult {
  src: { id: number; serial: string };
  dst: { id: number; serial: string };
  by: string;
  reachable: boolean;
  hops: number;
  latency_ns: number | null;
  bottleneck_gbps: number | null;
  path: { node: number; kind: string; card: number | null; label: string }[];
  cards: number[];
  links: (number | null)[];
}

/** An alert as the ws `alerts` message carries it (twin.telemetry.models.Alert.as_event). */
export interface AlertPayload {
  id: number;
  rule: string;
  severity: string; // "critical" | "warning" | "info"
  level?: string; // "card" | "rack" | "cluster"
  subject?: string;
  card: number | null;
  rack: number | null;
  supernode?: number | null;
  value?: number | null;
  threshold?: number | null;
  message: string;
  started: string | null; // ISO 8601
  ended: string | null;
  acknowledged_by?: string | null;
}
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
  showRoute(route: RouteResult | null): Promise<void>; // the scene implements: highlight
  /** Optional: the metric selected in the page (the card panel's sparkline follows it);
   *  without it the panels read `window.twin.view.metric`, else use gpu_util. */
  metric?(): string;
}
