/**
 * The live alert list, one line per group of alerts of the same rule and severity in
 * the same rack (alertlist.ts): a rack of 40 cards dropping utilisation is one line
 * "× 40" that expands to its alerts, not 40 lines. Seeded from
 * GET /api/telemetry/alerts/groups/?cluster=<id>&active=true (the counts of every open
 * alert) and the newest alerts (the members shown), then kept current by the ws
 * `alerts` messages the page forwards to push(). A single alert is a line of its own;
 * a click flies to the card (or a group's rack).
 */
import type { PaginatedAlertGroupList, PaginatedAlertList } from "../api";
import { button, explain, h } from "./dom";
import { formatAgo, formatMetric } from "./format";
import {
  alertTarget,
  applyGroupEvents,
  buildGroups,
  DEFAULT_ALERT_CAP,
  groupPlace,
  groupSeverityCounts,
  normalise,
  type AlertGroup,
} from "./alertlist";
import type { AlertEvent, AlertPayload, PanelHost } from "./host";

export interface AlertsOptions {
  /** Most alerts held to show inside the groups (default 200); the counts cover all. */
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

  let groups: AlertGroup[] = [];
  const expanded = new Set<string>(); // group keys the user opened
  let generation = 0;
  let buffered: AlertEvent[] = []; // events that arrive while the list is loading
  let loading = false;

  function clickable(li: HTMLElement, go: () => void): void {
    li.tabIndex = 0;
    li.addEventListener("click", (ev) => {
      ev.stopPropagation();
      go();
    });
    li.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        ev.stopPropagation();
        go();
      }
    });
  }

  function alertItem(a: AlertPayload, now: number): HTMLLIElement {
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
    if (target) clickable(li, () => void host.select(target, { fly: true }));
    return li;
  }

  function groupItem(g: AlertGroup, now: number): HTMLLIElement {
    const open = expanded.has(g.key);
    const toggle = button(
      open ? "▾" : "▸",
      {
        class: "tw-icon tw-group-toggle",
        "data-testid": "alert-group-toggle",
        "aria-expanded": String(open),
        "aria-label": `${open ? "Hide" : "Show"} the ${g.count} alerts`,
      },
      () => {
        if (expanded.has(g.key)) expanded.delete(g.key);
        else expanded.add(g.key);
        render();
      },
    );
    const li = h(
      "li",
      {
        "data-testid": "alert-group",
        class: `tw-alert-group sev-${g.severity}${g.scope === "rack" ? " clickable" : ""}`,
        "data-group": g.key,
        "data-count": String(g.count),
        "data-rule": g.rule,
        "data-severity": g.severity,
        "data-rack": g.scope === "rack" && g.place !== null ? String(g.place) : "",
        title: g.scope === "rack" ? "Show the rack" : "",
      },
      toggle,
      h("span", { class: "sev" }, g.severity),
      h("span", { class: "tw-count-badge", "data-testid": "alert-group-count" }, `× ${g.count}`),
      h("span", { class: "msg" }, `${g.rule.replace(/_/g, " ")} · ${groupPlace(g)}`),
      h("span", { class: "when" }, `newest ${formatAgo(g.newest, now)}`, g.message ? ` · ${g.message}` : ""),
    );
    if (g.scope === "rack" && g.place !== null) {
      const rack = g.place;
      clickable(li, () => void host.select({ kind: "rack", id: rack }, { fly: true }));
    }
    if (open) {
      const inner = h("ul", { class: "tw-alert-members", "data-testid": "alert-group-members" });
      inner.replaceChildren(...g.members.map((a) => alertItem(a, now)));
      const missing = g.count - g.members.length;
      if (missing > 0) inner.append(h("li", { class: "none" }, `… and ${missing} older not loaded.`));
      li.append(inner);
    }
    return li;
  }

  function render(): void {
    const c = groupSeverityCounts(groups);
    counts.replaceChildren(
      ...(["critical", "warning", "info"] as const)
        .filter((s) => c[s])
        .map((s) => h("span", { class: `sev-badge sev-${s}` }, `${c[s]} ${s}`)),
    );
    const total = groups.reduce((n, g) => n + g.count, 0);
    counts.dataset.count = String(total);
    counts.dataset.groups = String(groups.length);
    const now = Date.now();
    const items = groups.map((g) =>
      g.count === 1 && g.members.length === 1 ? alertItem(g.members[0], now) : groupItem(g, now),
    );
    if (items.length === 0) items.push(h("li", { class: "none" }, "No open alerts."));
    list.replaceChildren(...items);
    status.textContent =
      groups.length < total ? `${total} open alerts in ${groups.length} groups (by rule and rack).` : "";
  }

  const panel: AlertsPanel = {
    async reset(): Promise<void> {
      const gen = ++generation;
      loading = true;
      buffered = [];
      el.setAttribute("aria-busy", "true");
      const cluster = host.clusterId();
      try {
        const [grouped, page] = await Promise.all([
          host.api.get<PaginatedAlertGroupList>(`telemetry/alerts/groups/?cluster=${cluster}&active=true&limit=1000`),
          host.api.get<PaginatedAlertList>(
            `telemetry/alerts/?cluster=${cluster}&active=true&limit=${Math.min(1000, Math.max(cap, 1))}`,
          ),
        ]);
        if (gen !== generation) return;
        groups = applyGroupEvents(buildGroups(grouped.results, normalise(page.results, cap)), buffered);
        list.removeAttribute("data-error");
        render();
      } catch (error) {
        if (gen !== generation) return;
        groups = applyGroupEvents([], buffered);
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
      groups = applyGroupEvents(groups, events);
      render();
    },
  };
  render();
  // Keep "5 min ago" honest without a request.
  window.setInterval(() => {
    if (groups.length && document.visibilityState !== "hidden") render();
  }, 30_000);
  return panel;
}
