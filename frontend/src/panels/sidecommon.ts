/**
 * What the side panel's object views share: the context a view draws into
 * (the panel's elements, the host, the generation check that drops late
 * answers, the card's live refresh) and small building blocks.
 */
import { button, explain, h } from "./dom";
import { formatAgo } from "./format";
import type { MetricInfo, PanelHost, RouteEnd, Selection } from "./host";
import type { Sparkline } from "./sparkline";
import type { Alert, Metric } from "../api";

/** What an object view of the side panel draws into and calls back. */
export interface SideContext {
  readonly host: PanelHost;
  /** The panel element (its data-* attributes say what is shown). */
  readonly el: HTMLElement;
  readonly title: HTMLElement;
  readonly body: HTMLElement;
  /** Live values refresh period while a card is shown (ms). */
  readonly refreshMs: number;
  /** The card's live refresh: stopped (and the sparkline destroyed) when the panel moves on. */
  readonly live: { timer: number | null; spark: Sparkline | null };
  stopLive(): void;
  /** True when the panel moved on since generation `gen` started: drop the answer. */
  stale(gen: number): boolean;
  /** A card's route button was pressed. */
  routeEnd(which: RouteEnd, cardId: number): void;
}

/** The metric the page colours by (the sparkline follows it). */
export function selectedMetric(host: PanelHost): string {
  const fromHost = host.metric?.();
  if (fromHost) return fromHost;
  const twin = (window as unknown as { twin?: { view?: { metric?: string } } }).twin;
  return twin?.view?.metric ?? "gpu_util";
}

/** A link that selects an object through the host (flies the camera there). */
export function objectLink(host: PanelHost, sel: Selection, text: string): HTMLElement {
  return button(text, { class: "linkish", "data-kind": sel.kind, "data-id": String(sel.id) }, () => {
    void host.select(sel, { fly: true });
  });
}

/** A titled section of the panel body. */
export function section(title: string, ...children: (Node | string | null)[]): HTMLElement {
  return h("section", { class: "tw-section" }, h("h3", {}, title), ...children);
}

/** A failed request, said in the panel (never thrown). */
export function errorLine(error: unknown): HTMLElement {
  return h("p", { class: "tw-error", "data-testid": "panel-error" }, explain(error));
}

/** Open alerts, worst first as the API orders them. */
export function alertList(alerts: ReadonlyArray<Alert>): HTMLElement {
  const list = h("ul", { class: "tw-alerts", "data-testid": "panel-alerts", "data-count": String(alerts.length) });
  if (alerts.length === 0) {
    list.append(h("li", { class: "none" }, "No open alerts."));
    return list;
  }
  for (const a of alerts) {
    list.append(
      h(
        "li",
        { class: `sev-${a.severity}`, "data-alert-id": String(a.id) },
        h("span", { class: "sev" }, a.severity),
        h("span", { class: "msg" }, a.message || a.rule),
        h("span", { class: "when" }, formatAgo(a.started)),
      ),
    );
  }
  return list;
}

/** Metrics in the order of the live view's hello (else the API's metric list). */
let metricsCache: MetricInfo[] | null = null;
export async function metricList(host: PanelHost): Promise<MetricInfo[]> {
  const fromHost = host.metrics();
  if (fromHost.length) return fromHost;
  if (metricsCache) return metricsCache;
  try {
    metricsCache = await host.api.get<Metric[]>("telemetry/metrics/");
  } catch {
    metricsCache = [];
  }
  return metricsCache;
}
