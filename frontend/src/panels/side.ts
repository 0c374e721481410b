/**
 * The side panel: what the user clicked in the scene (a card, rack, link or
 * supernode) — spec, live values refreshed every 2 s with a sparkline, open
 * alerts, neighbours — and the buttons that start a route from or to a card.
 *
 * Every request's failure is shown in the panel (never thrown as an uncaught
 * error); an answer that arrives after the user moved on to another object is
 * dropped (a generation counter per show()).
 */
import { formatCount, formatPercent, formatPower, utilisationColour } from "../format";
import { button, chip, dl, explain, h } from "./dom";
import { formatAgo, formatGbps, formatMetric, formatNs, formatNumber } from "./format";
import {
  ROUTE_END_EVENT,
  type MetricInfo,
  type PanelHost,
  type RouteEnd,
  type RouteEndDetail,
  type Selection,
} from "./host";
import { createSparkline, type Sparkline } from "./sparkline";
import {
  HISTORY_METRICS,
  type AcceleratorRow,
  type AlertRow,
  type CardLive,
  type CardRow,
  type CursorPage,
  type DeviceRow,
  type LinkRow,
  type RackGeometry,
  type RackRow,
  type ServerRow,
  type SuperNodeRow,
} from "./types";

export interface SidePanelOptions {
  /** Called by the card's route buttons; without it they dispatch "twin:route-end" on document. */
  onRouteEnd?: (which: RouteEnd, cardId: number) => void;
  /** Live values refresh period while a card is shown (ms, default 2000). */
  refreshMs?: number;
}

export interface SidePanel {
  show(sel: Selection): Promise<void>;
  hide(): void;
  /** What is shown now (null when hidden). */
  current(): Selection | null;
}

const KIND_LABEL: Record<Selection["kind"], string> = {
  card: "card",
  rack: "rack",
  link: "link",
  supernode: "supernode",
};

function selectedMetric(host: PanelHost): string {
  const fromHost = host.metric?.();
  if (fromHost) return fromHost;
  const twin = (window as unknown as { twin?: { view?: { metric?: string } } }).twin;
  return twin?.view?.metric ?? "gpu_util";
}

/** A link that selects an object through the host (flies the camera there). */
function objectLink(host: PanelHost, sel: Selection, text: string): HTMLElement {
  return button(text, { class: "linkish", "data-kind": sel.kind, "data-id": String(sel.id) }, () => {
    void host.select(sel, { fly: true });
  });
}

function section(title: string, ...children: (Node | string | null)[]): HTMLElement {
  return h("section", { class: "tw-section" }, h("h3", {}, title), ...children);
}

function errorLine(error: unknown): HTMLElement {
  return h("p", { class: "tw-error", "data-testid": "panel-error" }, explain(error));
}

function alertList(alerts: ReadonlyArray<AlertRow>): HTMLElement {
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
async function metricList(host: PanelHost): Promise<MetricInfo[]> {
  const fromHost = host.metrics();
  if (fromHost.length) return fromHost;
  if (metricsCache) return metricsCache;
  try {
    metricsCache = await host.api.get<MetricInfo[]>("telemetry/metrics/");
  } catch {
    metricsCache = [];
  }
  return metricsCache;
}

export function mountSidePanel(el: HTMLElement, host: PanelHost, opts: SidePanelOptions = {}): SidePanel {
  const refreshMs = opts.refreshMs ?? 2000;
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "side-panel");
  el.classList.add("tw-panel", "tw-side");

  const kindEl = h("span", { class: "tw-kind", "data-testid": "panel-kind" });
  const titleEl = h("h2", { class: "tw-title", "data-testid": "panel-title" });
  const body = h("div", { class: "tw-body" });
  const close = button(
    "×",
    { class: "tw-close", "data-testid": "panel-close", title: "Close", "aria-label": "Close" },
    () => panel.hide(),
  );
  el.replaceChildren(h("header", { class: "tw-head" }, kindEl, titleEl, close), body);
  el.hidden = true;

  let current: Selection | null = null;
  let generation = 0;
  let timer: number | null = null;
  let spark: Sparkline | null = null;

  const stale = (gen: number) => gen !== generation;

  function stopLive(): void {
    if (timer !== null) window.clearInterval(timer);
    timer = null;
    spark?.destroy();
    spark = null;
  }

  function begin(sel: Selection, title: string): number {
    stopLive();
    generation += 1;
    current = sel;
    el.hidden = false;
    el.dataset.kind = sel.kind;
    el.dataset.id = String(sel.id);
    kindEl.textContent = KIND_LABEL[sel.kind];
    titleEl.textContent = title;
    body.replaceChildren(h("p", { class: "tw-loading" }, "Loading…"));
    el.setAttribute("aria-busy", "true");
    return generation;
  }

  function done(gen: number): void {
    if (!stale(gen)) el.removeAttribute("aria-busy");
  }

  function routeEnd(which: RouteEnd, cardId: number): void {
    if (opts.onRouteEnd) {
      opts.onRouteEnd(which, cardId);
      return;
    }
    document.dispatchEvent(new CustomEvent<RouteEndDetail>(ROUTE_END_EVENT, { detail: { which, cardId } }));
  }

  // ---------------------------------------------------------------- card
  async function showCard(id: number, gen: number): Promise<void> {
    const actions = h(
      "div",
      { class: "tw-actions" },
      button("Route from here", { "data-testid": "route-from-here", class: "tw-btn" }, () => routeEnd("src", id)),
      button("Route to here", { "data-testid": "route-to-here", class: "tw-btn" }, () => routeEnd("dst", id)),
    );
    const liveBox = h("div", { class: "tw-live" }, h("p", { class: "tw-loading" }, "Loading live values…"));
    const alertsBox = h("div", {}, alertList([]));
    const specBox = h("div", {}, h("p", { class: "tw-loading" }, "Loading…"));
    const neighboursBox = h("div", {}, h("p", { class: "tw-loading" }, "Loading…"));
    body.replaceChildren(
      actions,
      section("Live", liveBox),
      section("Open alerts", alertsBox),
      section("Spec", specBox),
      section("Neighbours", neighboursBox),
    );

    let card: CardRow;
    try {
      card = await host.api.get<CardRow>(`cards/${id}/`);
    } catch (error) {
      if (stale(gen)) return;
      body.replaceChildren(errorLine(error));
      return;
    }
    if (stale(gen)) return;
    titleEl.textContent = card.serial;
    el.dataset.serial = card.serial;

    await Promise.all([
      cardLive(card, gen, liveBox, alertsBox),
      cardSpec(card, gen, specBox),
      cardNeighbours(card, gen, neighboursBox),
    ]);
  }

  async function cardLive(card: CardRow, gen: number, box: HTMLElement, alertsBox: HTMLElement): Promise<void> {
    const metrics = await metricList(host);
    if (stale(gen)) return;
    // The sparkline follows the page's metric (gpu_util for one without history)
    // until the user picks one by clicking its label.
    const followed = () => {
      const wanted = selectedMetric(host);
      return HISTORY_METRICS.includes(wanted) ? wanted : "gpu_util";
    };
    let historyMetric = followed();
    let pinned = false;
    const rows = new Map<string, HTMLElement>();
    const values = h("dl", { class: "tw-values" });
    const health = h("p", { class: "tw-health", "data-testid": "panel-health" });
    const sparkTitle = h("p", { class: "tw-spark-title" });
    const sparkBox = h("div", { class: "tw-spark", "data-testid": "panel-sparkline" });
    const error = h("p", { class: "tw-error", hidden: "" });
    box.replaceChildren(health, sparkTitle, sparkBox, error, values);
    spark = createSparkline(sparkBox);
    const infoOf = new Map(metrics.map((m) => [m.key, m]));
    let inFlight = false;

    function row(key: string): HTMLElement {
      let dd = rows.get(key);
      if (dd) return dd;
      const info = infoOf.get(key);
      const dt = h("dt", { title: key }, info?.label ?? key);
      dd = h("dd", { "data-testid": `panel-value-${key}`, "data-metric": key });
      if (HISTORY_METRICS.includes(key)) {
        dt.classList.add("has-history");
        dt.title = `${key}: click to chart its recent history`;
        dt.addEventListener("click", () => {
          historyMetric = key;
          pinned = true;
          void refresh();
        });
      }
      values.append(dt, dd);
      rows.set(key, dd);
      return dd;
    }
    for (const m of metrics) row(m.key);

    async function refresh(): Promise<void> {
      if (inFlight || stale(gen)) return;
      inFlight = true;
      if (!pinned) historyMetric = followed();
      const metric = historyMetric;
      try {
        const live = await host.api.get<CardLive>(
          `telemetry/cards/${card.id}/?history=${encodeURIComponent(metric)}&n=60`,
        );
        if (stale(gen)) return;
        error.hidden = true;
        for (const [key, value] of Object.entries(live.metrics)) {
          const dd = row(key);
          dd.dataset.value = value === null ? "" : String(value);
          dd.textContent = formatMetric(value, infoOf.get(key)?.unit ?? "");
        }
        health.replaceChildren(
          "Health ",
          chip(live.health, "health"),
          live.age_s === null ? " · never reported" : ` · last report ${formatNumber(live.age_s, 2)} s ago`,
          live.stale ? " (stale)" : "",
          live.health_detail?.reasons ? ` · ${live.health_detail.reasons}` : "",
        );
        health.dataset.health = live.health;
        const points = live.history?.points ?? [];
        const info = infoOf.get(metric);
        const ys = points.map((p) => p[1]).filter((v): v is number => v !== null);
        sparkTitle.textContent =
          `${info?.label ?? metric}, last ${points.length} samples` +
          (ys.length
            ? ` · ${formatMetric(Math.min(...ys), info?.unit ?? "")} – ${formatMetric(Math.max(...ys), info?.unit ?? "")}`
            : " · no history yet");
        sparkBox.dataset.metric = metric;
        spark?.set(points);
        alertsBox.replaceChildren(alertList(live.alerts));
      } catch (err) {
        if (stale(gen)) return;
        error.hidden = false;
        error.textContent = `Live values: ${explain(err)}`;
      } finally {
        inFlight = false;
      }
    }

    await refresh();
    if (stale(gen)) return;
    timer = window.setInterval(() => {
      if (!el.isConnected)
        stopLive(); // the page dropped the panel without hide()
      else if (document.visibilityState !== "hidden") void refresh();
    }, refreshMs);
  }

  async function cardSpec(card: CardRow, gen: number, box: HTMLElement): Promise<void> {
    const [acc, server, rack, supernode] = await Promise.allSettled([
      host.api.get<AcceleratorRow>(`accelerators/${card.accelerator}/`),
      host.api.get<ServerRow>(`servers/${card.server}/`),
      host.api.get<RackRow>(`racks/${card.rack}/`),
      host.api.get<SuperNodeRow>(`supernodes/${card.supernode}/`),
    ]);
    if (stale(gen)) return;
    const rows: [string, Node | string | null][] = [];
    if (acc.status === "fulfilled") {
      const a = acc.value;
      rows.push(
        ["Model", `${a.name}${a.vendor ? ` (${a.vendor})` : ""}`],
        [
          "Memory",
          a.hbm_gib === null
            ? "—"
            : `${formatNumber(a.hbm_gib)} GiB HBM${a.hbm_tbps ? ` · ${formatNumber(a.hbm_tbps)} TB/s` : ""}`,
        ],
        [
          "TFLOP/s",
          [
            a.fp8_tflops ? `FP8 ${formatNumber(a.fp8_tflops)}` : "",
            a.bf16_tflops ? `BF16 ${formatNumber(a.bf16_tflops)}` : "",
            a.tf32_tflops ? `TF32 ${formatNumber(a.tf32_tflops)}` : "",
            a.fp32_tflops ? `FP32 ${formatNumber(a.fp32_tflops)}` : "",
          ]
            .filter(Boolean)
            .join(" · ") || "—",
        ],
        [
          "TDP",
          a.tdp_w === null ? "—" : `${formatPower(a.tdp_w)}${a.idle_w ? ` (idle ${formatPower(a.idle_w)})` : ""}`,
        ],
        ["Scale-up", a.scaleup_links ? `${a.scaleup_links} links · ${formatGbps(a.scaleup_gbps)}` : "—"],
      );
    } else {
      rows.push(["Model", explain(acc.reason)]);
    }
    rows.push(
      ["Status", chip(card.status)],
      [
        "Server",
        server.status === "fulfilled"
          ? `${server.value.name}${server.value.hostname ? ` (${server.value.hostname})` : ""} · slot ${card.slot}`
          : `#${card.server}`,
      ],
      [
        "Rack",
        objectLink(
          host,
          { kind: "rack", id: card.rack },
          rack.status === "fulfilled" ? rack.value.name : `#${card.rack}`,
        ),
      ],
      [
        "Supernode",
        objectLink(
          host,
          { kind: "supernode", id: card.supernode },
          supernode.status === "fulfilled" ? supernode.value.name : `#${card.supernode}`,
        ),
      ],
      ["Index", String(card.index)],
      ["Torus x/y/z", card.x === null ? "—" : `${card.x} / ${card.y} / ${card.z}`],
      ["Card id", String(card.id)],
    );
    box.replaceChildren(dl(rows));
  }

  async function cardNeighbours(card: CardRow, gen: number, box: HTMLElement): Promise<void> {
    let links: LinkRow[];
    try {
      links = (await host.api.get<CursorPage<LinkRow>>(`links/?card=${card.id}&limit=200`)).results;
    } catch (error) {
      if (!stale(gen)) box.replaceChildren(errorLine(error));
      return;
    }
    if (stale(gen)) return;
    const list = h("ul", {
      class: "tw-neighbours",
      "data-testid": "panel-neighbours",
      "data-count": String(links.length),
    });
    for (const link of links) {
      const mineA = link.a_card === card.id;
      const labels = link.display.split(" ↔ ");
      const otherLabel = (mineA ? labels[1] : labels[0]) ?? "?";
      const otherCard = mineA ? link.b_card : link.a_card;
      const otherKind = (mineA ? link.b_kind : link.a_kind) ?? "?";
      const li = h(
        "li",
        {
          class: `status-${link.status}`,
          "data-link-id": String(link.id),
          "data-card": otherCard === null ? "" : String(otherCard),
          title: otherCard === null ? "Show this link" : "Show this card",
        },
        h("span", { class: "end" }, otherLabel),
        h("span", { class: "muted" }, otherCard === null ? otherKind : "card"),
        h("span", { class: "muted" }, `${link.kind} · ${formatGbps(link.bandwidth_gbps)}`),
        chip(link.status),
      );
      li.addEventListener("click", () => {
        const target: Selection = otherCard === null ? { kind: "link", id: link.id } : { kind: "card", id: otherCard };
        void host.select(target, { fly: true });
      });
      list.append(li);
    }
    if (links.length === 0) list.append(h("li", { class: "none" }, "No links."));
    box.replaceChildren(list);
  }

  // ---------------------------------------------------------------- rack
  async function showRack(id: number, gen: number): Promise<void> {
    const [rackR, geoR, alertsR] = await Promise.allSettled([
      host.api.get<RackRow>(`racks/${id}/`),
      host.api.get<RackGeometry>(`racks/${id}/geometry/`),
      host.api.get<{ results: AlertRow[] }>(`telemetry/alerts/?rack=${id}&active=true&limit=50`),
    ]);
    if (stale(gen)) return;
    if (rackR.status === "rejected") {
      body.replaceChildren(errorLine(rackR.reason));
      return;
    }
    const rack = rackR.value;
    titleEl.textContent = rack.name;
    let supernodeName = rack.supernode === null ? "" : `#${rack.supernode}`;
    if (rack.supernode !== null) {
      try {
        supernodeName = (await host.api.get<SuperNodeRow>(`supernodes/${rack.supernode}/`)).name;
      } catch {
        // Keep "#id": the link still works.
      }
      if (stale(gen)) return;
    }
    const budget = rack.power_budget_w || 1;
    const bar = h("div", { class: "bar tw-power-bar", "data-testid": "panel-power-bar" }, h("span", {}));
    bar.dataset.powerW = String(rack.power_w);
    bar.dataset.budgetW = String(rack.power_budget_w);
    const fill = bar.firstElementChild as HTMLElement;
    fill.style.width = `${Math.min(100, (rack.power_w / budget) * 100).toFixed(1)}%`;
    fill.style.background = utilisationColour(Math.max(rack.power_w, 0), budget);
    const parts: HTMLElement[] = [
      section(
        "Power",
        h(
          "p",
          { class: "tw-power" },
          `${formatPower(rack.power_w)} of ${formatPower(rack.power_budget_w)} (${formatPercent(rack.utilization)})`,
        ),
        bar,
        dl([
          ["Headroom", formatPower(rack.headroom_w)],
          ["Facility (× PUE)", formatPower(rack.facility_w)],
          ["PUE", formatNumber(rack.pue, 3)],
          ["Cooling", rack.cooling],
        ]),
      ),
      section(
        "Place",
        dl([
          [
            "Supernode",
            rack.supernode === null
              ? "— (network rack)"
              : objectLink(host, { kind: "supernode", id: rack.supernode }, supernodeName),
          ],
          ["Row / slot", `${rack.row} / ${rack.slot}`],
          ["Rack id", String(rack.id)],
        ]),
      ),
      section(
        "Open alerts",
        alertsR.status === "fulfilled" ? alertList(alertsR.value.results) : errorLine(alertsR.reason),
      ),
    ];
    if (geoR.status === "fulfilled") {
      const geo = geoR.value;
      let cards = 0;
      const byStatus: Record<string, number> = {};
      const servers = h("ul", { class: "tw-servers", "data-testid": "panel-servers" });
      for (const server of [...geo.servers].sort((a, b) => b.position - a.position)) {
        const chips = h("span", { class: "tw-cards" });
        for (const c of server.cards) {
          cards += 1;
          byStatus[c.status] = (byStatus[c.status] ?? 0) + 1;
          chips.append(
            button(
              "",
              {
                class: `tw-cardchip status-${c.status}`,
                title: `${c.serial} (${c.status})`,
                "data-card": String(c.id),
              },
              () => {
                void host.select({ kind: "card", id: c.id }, { fly: true });
              },
            ),
          );
        }
        servers.append(
          h(
            "li",
            { "data-server": String(server.id) },
            h("span", { class: "pos" }, `U${server.position}`),
            h("span", { class: "name" }, server.name),
            chips,
          ),
        );
      }
      const summary =
        `${formatCount(geo.servers.length)} servers · ${formatCount(cards)} cards` +
        (Object.keys(byStatus).length
          ? ` (${Object.entries(byStatus)
              .map(([s, n]) => `${n} ${s}`)
              .join(", ")})`
          : "");
      const devices = geo.devices.length
        ? h("p", { class: "muted" }, `Devices: ${geo.devices.map((d) => `${d.name} (${d.kind})`).join(", ")}`)
        : null;
      parts.push(
        section("Servers and cards", h("p", { "data-testid": "panel-rack-summary" }, summary), servers, devices),
      );
    } else {
      parts.push(section("Servers and cards", errorLine(geoR.reason)));
    }
    body.replaceChildren(...parts);
  }

  // ---------------------------------------------------------------- link
  async function endNode(
    card: number | null,
    device: number | null,
    kind: string | null,
    label: string,
  ): Promise<Node | string> {
    if (card !== null) return objectLink(host, { kind: "card", id: card }, label);
    if (device !== null) {
      try {
        const d = await host.api.get<DeviceRow>(`devices/${device}/`);
        return `${d.name} (${d.kind}${d.model ? `, ${d.model}` : ""})`;
      } catch {
        return `${label} (${kind ?? "device"})`;
      }
    }
    return "—";
  }

  async function showLink(id: number, gen: number): Promise<void> {
    let link: LinkRow;
    try {
      link = await host.api.get<LinkRow>(`links/${id}/`);
    } catch (error) {
      if (!stale(gen)) body.replaceChildren(errorLine(error));
      return;
    }
    if (stale(gen)) return;
    titleEl.textContent = link.display;
    const [la, lb] = link.display.split(" ↔ ");
    const [a, b] = await Promise.all([
      endNode(link.a_card, link.a_device, link.a_kind, la ?? "?"),
      endNode(link.b_card, link.b_device, link.b_kind, lb ?? "?"),
    ]);
    if (stale(gen)) return;
    body.replaceChildren(
      section(
        "Link",
        dl([
          ["End A", a],
          ["End B", b],
          ["Kind", link.kind],
          ["Bandwidth", `${formatGbps(link.bandwidth_gbps)} per direction`],
          ["Latency", formatNs(link.latency_ns)],
          ["Status", chip(link.status)],
          ["Link id", String(link.id)],
        ]),
      ),
    );
  }

  // ----------------------------------------------------------- supernode
  async function showSupernode(id: number, gen: number): Promise<void> {
    const [snR, racksR] = await Promise.allSettled([
      host.api.get<SuperNodeRow>(`supernodes/${id}/`),
      host.api.get<{ results: RackRow[] }>(`racks/?supernode=${id}&ordering=row,slot&limit=1000`),
    ]);
    if (stale(gen)) return;
    if (snR.status === "rejected") {
      body.replaceChildren(errorLine(snR.reason));
      return;
    }
    const sn = snR.value;
    titleEl.textContent = sn.name;
    const dims = [sn.dim_x, sn.dim_y, sn.dim_z].filter((d): d is number => d !== null && d !== undefined);
    const parts: HTMLElement[] = [
      section(
        "Supernode",
        dl([
          ["Fabric", sn.fabric],
          ["Dimensions", dims.length ? dims.join(" × ") : "—"],
          ["Cards", formatCount(sn.card_count)],
          ["Scale-up link", sn.link_gbps ? `${formatGbps(sn.link_gbps)} · ${formatNs(sn.link_latency_ns)}` : "—"],
          ["Switch latency", formatNs(sn.switch_latency_ns)],
          ["Index", String(sn.index)],
        ]),
      ),
    ];
    if (racksR.status === "fulfilled") {
      const racks = racksR.value.results;
      const list = h("ul", { class: "tw-racks", "data-testid": "panel-racks", "data-count": String(racks.length) });
      for (const r of racks) {
        const swatch = h("span", { class: "swatch" });
        swatch.style.background = utilisationColour(Math.max(r.power_w, 0), r.power_budget_w || 1);
        const li = h(
          "li",
          { "data-rack": String(r.id), title: "Show this rack" },
          swatch,
          h("span", { class: "end" }, r.name),
          h("span", { class: "muted" }, `${formatPower(r.power_w)} · ${formatPercent(r.utilization)}`),
        );
        li.addEventListener("click", () => void host.select({ kind: "rack", id: r.id }, { fly: true }));
        list.append(li);
      }
      parts.push(section(`Racks (${racks.length})`, list));
    } else {
      parts.push(section("Racks", errorLine(racksR.reason)));
    }
    body.replaceChildren(...parts);
  }

  const panel: SidePanel = {
    async show(sel: Selection): Promise<void> {
      const gen = begin(sel, `${KIND_LABEL[sel.kind]} #${sel.id}`);
      try {
        if (sel.kind === "card") await showCard(sel.id, gen);
        else if (sel.kind === "rack") await showRack(sel.id, gen);
        else if (sel.kind === "link") await showLink(sel.id, gen);
        else if (sel.kind === "supernode") await showSupernode(sel.id, gen);
        else body.replaceChildren(h("p", { class: "tw-error" }, `Cannot show a ${String(sel.kind)}.`));
      } catch (error) {
        if (!stale(gen)) body.replaceChildren(errorLine(error));
      } finally {
        done(gen);
      }
    },
    hide(): void {
      stopLive();
      generation += 1;
      current = null;
      el.hidden = true;
      el.removeAttribute("aria-busy");
      delete el.dataset.kind;
      delete el.dataset.id;
      delete el.dataset.serial;
      body.replaceChildren();
      el.dispatchEvent(new CustomEvent("twin:panel-closed", { bubbles: true }));
    },
    current: () => current,
  };
  return panel;
}
