/**
 * The live alert list: seeded from GET /api/telemetry/alerts/?cluster=<id>&active=true,
 * then kept current by the ws `alerts` messages the page forwards to push().
 * Newest first, coloured by severity, capped; a click flies to the card (or rack).
 */
import type { PaginatedAlertList } from "../api";
import { button, explain, h } from "./dom";
import { formatAgo, formatMetric } from "./format";
import { alertTarget, DEFAULT_ALERT_CAP, mergeAlerts, normalise, severityCounts } from "./alertlist";
import type { AlertEvent, AlertPayload, PanelHost } from "./host";

export interface AlertsOptions {
  /** Most alerts listed (default 200); the header still says how many are open. */
  cap?: number;
}

export interface AlertsPanel {
  /** Reload from the API (the cluster changed, or the socket reconnected). */
  reset(): Promise<void>;
  /** Apply ws events; `dropped` > 0 (events the server coalesced away) triggers a reload. */
  push(events: AlertEvent[], dropped?: number): void;
}

export function mountAlerts(el: HTMLElement, host: PanelHost, opts: AlertsOptions = {}): AlertsPanel {
  const cap = opts.cap ?? DEFAULT_ALERT_CAP;
  el.classList.add("tw-panel", "tw-alerts-panel");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "alerts-panel");
  const counts = h("span", { class: "tw-counts", "data-testid": "alerts-count" });
  const list = h("ul", { class: "tw-alert-list", "data-testid": "alerts-list" });
  const status = h("p", { class: "tw-muted" });
  const reload = button(
    "↻",
    { class: "tw-icon", title: "Reload alerts", "aria-label": "Reload alerts" },
    () => void panel.reset(),
  );
  el.replaceChildren(
    h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Alerts"), counts, reload),
    status,
    list,
  );

  let alerts: AlertPayload[] = [];
  let total = 0; // open alerts the API reported (may exceed the cap)
  let generation = 0;
  let buffered: AlertEvent[] = []; // events that arrive while the list is loading
  let loading = false;

  function render(): void {
    const c = severityCounts(alerts);
    counts.replaceChildren(
      ...(["critical", "warning", "info"] as const)
        .filter((s) => c[s])
        .map((s) => h("span", { class: `sev-badge sev-${s}` }, `${c[s]} ${s}`)),
    );
    counts.dataset.count = String(alerts.length);
    const now = Date.now();
    const items = alerts.map((a) => {
      const target = alertTarget(a);
      const li = h(
        "li",
        {
          "data-testid": "alert-item",
          class: `sev-${a.severity}${target ? " clickable" : ""}${a.acknowledged_by ? " acked" : ""}`,
          "data-alert-id": String(a.id),
          "data-card": a.card === null || a.card === undefined ? "" : String(a.card),
          "data-rack": a.rack === null || a.rack === undefined ? "" : String(a.rack),
          "data-severity": a.severity,
          "data-rule": a.rule,
          title: target ? `Show the ${target.kind}` : "",
        },
        h("span", { class: "sev" }, a.severity),
        h("span", { class: "msg" }, a.message || `${a.rule} on ${a.subject ?? "?"}`),
        h(
          "span",
          { class: "when" },
          formatAgo(a.started, now),
          a.acknowledged_by ? ` · ack ${a.acknowledged_by}` : "",
          typeof a.value === "number" && !a.message ? ` · ${formatMetric(a.value, "")}` : "",
        ),
      );
      if (target) {
        li.tabIndex = 0;
        const go = () => void host.select(target, { fly: true });
        li.addEventListener("click", go);
        li.addEventListener("keydown", (ev) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            go();
          }
        });
      }
      return li;
    });
    if (items.length === 0) items.push(h("li", { class: "none" }, "No open alerts."));
    list.replaceChildren(...items);
    status.textContent = total > alerts.length ? `Showing the newest ${alerts.length} of ${total} open alerts.` : "";
  }

  const panel: AlertsPanel = {
    async reset(): Promise<void> {
      const gen = ++generation;
      loading = true;
      buffered = [];
      el.setAttribute("aria-busy", "true");
      try {
        const page = await host.api.get<PaginatedAlertList>(
          `telemetry/alerts/?cluster=${host.clusterId()}&active=true&limit=${Math.min(1000, Math.max(cap, 1))}`,
        );
        if (gen !== generation) return;
        alerts = mergeAlerts(normalise(page.results, cap), buffered, cap);
        total = Math.max(page.count ?? page.results.length, alerts.length);
        list.removeAttribute("data-error");
        render();
      } catch (error) {
        if (gen !== generation) return;
        alerts = mergeAlerts([], buffered, cap);
        list.dataset.error = "1";
        render();
        status.textContent = `Could not load the alerts: ${explain(error)}`;
      } finally {
        if (gen === generation) {
          loading = false;
          buffered = [];
          el.removeAttribute("aria-busy");
        }
      }
    },
    push(events: AlertEvent[], dropped = 0): void {
      if (dropped > 0) {
        void panel.reset();
        return;
      }
      if (!events.length) return;
      if (loading) {
        buffered.push(...events);
        return;
      }
      const before = new Set(alerts.map((a) => a.id));
      alerts = mergeAlerts(alerts, events, cap);
      for (const e of events) {
        if (e.event === "opened" && !before.has(e.alert.id)) total += 1;
        if (e.event === "closed") total = Math.max(0, total - 1);
      }
      total = Math.max(total, alerts.length);
      render();
    },
  };
  render();
  // Keep "5 min ago" honest without a request.
  window.setInterval(() => {
    if (alerts.length && document.visibilityState !== "hidden") render();
  }, 30_000);
  return panel;
}
