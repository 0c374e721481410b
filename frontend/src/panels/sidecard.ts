/**
 * The side panel's card: its live values (refreshed every few seconds, with a
 * sparkline of one metric's recent history), open alerts, spec (accelerator,
 * server, rack, supernode) and neighbours, and the buttons that start a route
 * from or to it.
 */
import { formatPower } from "../format";
import { button, chip, dl, explain, h } from "./dom";
import { formatGbps, formatMetric, formatNumber } from "./format";
import type { Selection } from "./host";
import { alertList, errorLine, metricList, objectLink, section, selectedMetric, type SideContext } from "./sidecommon";
import { createSparkline } from "./sparkline";
import type { AcceleratorType, Card, Link, PaginatedLinkList, Rack, Server, SuperNode } from "../api";
import { config } from "../config";
import type { CardLive } from "./types";

export async function showCard(ctx: SideContext, id: number, gen: number): Promise<void> {
  const actions = h(
    "div",
    { class: "tw-actions" },
    button("Route from here", { "data-testid": "route-from-here", class: "tw-btn" }, () => ctx.routeEnd("src", id)),
    button("Route to here", { "data-testid": "route-to-here", class: "tw-btn" }, () => ctx.routeEnd("dst", id)),
  );
  const liveBox = h("div", { class: "tw-live" }, h("p", { class: "tw-loading" }, "Loading live values…"));
  const alertsBox = h("div", {}, alertList([]));
  const specBox = h("div", {}, h("p", { class: "tw-loading" }, "Loading…"));
  const neighboursBox = h("div", {}, h("p", { class: "tw-loading" }, "Loading…"));
  ctx.body.replaceChildren(
    actions,
    section("Live", liveBox),
    section("Open alerts", alertsBox),
    section("Spec", specBox),
    section("Neighbours", neighboursBox),
  );

  let card: Card;
  try {
    card = await ctx.host.api.get<Card>(`cards/${id}/`);
  } catch (error) {
    if (ctx.stale(gen)) return;
    ctx.body.replaceChildren(errorLine(error));
    return;
  }
  if (ctx.stale(gen)) return;
  ctx.title.textContent = card.serial;
  ctx.el.dataset.serial = card.serial;

  await Promise.all([
    cardLive(ctx, card, gen, liveBox, alertsBox),
    cardSpec(ctx, card, gen, specBox),
    cardNeighbours(ctx, card, gen, neighboursBox),
  ]);
}

async function cardLive(
  ctx: SideContext,
  card: Card,
  gen: number,
  box: HTMLElement,
  alertsBox: HTMLElement,
): Promise<void> {
  const metrics = await metricList(ctx.host);
  if (ctx.stale(gen)) return;
  // The sparkline follows the page's metric (gpu_util for one without history)
  // until the user picks one by clicking its label.
  const followed = () => {
    const wanted = selectedMetric(ctx.host);
    return config().history_metrics.includes(wanted) ? wanted : "gpu_util";
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
  ctx.live.spark = createSparkline(sparkBox);
  const infoOf = new Map(metrics.map((m) => [m.key, m]));
  let inFlight = false;

  function row(key: string): HTMLElement {
    let dd = rows.get(key);
    if (dd) return dd;
    const info = infoOf.get(key);
    const dt = h("dt", { title: key }, info?.label ?? key);
    dd = h("dd", { "data-testid": `panel-value-${key}`, "data-metric": key });
    if (config().history_metrics.includes(key)) {
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
    if (inFlight || ctx.stale(gen)) return;
    inFlight = true;
    if (!pinned) historyMetric = followed();
    const metric = historyMetric;
    try {
      const live = await ctx.host.api.get<CardLive>(
        `telemetry/cards/${card.id}/?history=${encodeURIComponent(metric)}&n=60`,
      );
      if (ctx.stale(gen)) return;
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
      ctx.live.spark?.set(points);
      alertsBox.replaceChildren(alertList(live.alerts));
    } catch (err) {
      if (ctx.stale(gen)) return;
      error.hidden = false;
      error.textContent = `Live values: ${explain(err)}`;
    } finally {
      inFlight = false;
    }
  }

  await refresh();
  if (ctx.stale(gen)) return;
  ctx.live.timer = window.setInterval(() => {
    if (!ctx.el.isConnected)
      ctx.stopLive(); // the page dropped the panel without hide()
    else if (document.visibilityState !== "hidden") void refresh();
  }, ctx.refreshMs);
}

async function cardSpec(ctx: SideContext, card: Card, gen: number, box: HTMLElement): Promise<void> {
  const [acc, server, rack, supernode] = await Promise.allSettled([
    ctx.host.api.get<AcceleratorType>(`accelerators/${card.accelerator}/`),
    ctx.host.api.get<Server>(`servers/${card.server}/`),
    ctx.host.api.get<Rack>(`racks/${card.rack}/`),
    ctx.host.api.get<SuperNode>(`supernodes/${card.supernode}/`),
  ]);
  if (ctx.stale(gen)) return;
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
      ["TDP", a.tdp_w === null ? "—" : `${formatPower(a.tdp_w)}${a.idle_w ? ` (idle ${formatPower(a.idle_w)})` : ""}`],
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
        ctx.host,
        { kind: "rack", id: card.rack },
        rack.status === "fulfilled" ? rack.value.name : `#${card.rack}`,
      ),
    ],
    [
      "Supernode",
      objectLink(
        ctx.host,
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

async function cardNeighbours(ctx: SideContext, card: Card, gen: number, box: HTMLElement): Promise<void> {
  let links: Link[];
  try {
    links = (await ctx.host.api.get<PaginatedLinkList>(`links/?card=${card.id}&limit=200`)).results;
  } catch (error) {
    if (!ctx.stale(gen)) box.replaceChildren(errorLine(error));
    return;
  }
  if (ctx.stale(gen)) return;
  const list = h("ul", {
    class: "tw-neighbours",
    "data-testid": "panel-neighbours",
    "data-count": String(links.length),
  });
  for (const link of links) {
    const mineA = link.a_card === card.id;
    const labels = link.display.split(" ↔ ");
    const otherLabel = (mineA ? labels[1] : labels[0]) ?? "?";
    const otherCard = (mineA ? link.b_card : link.a_card) ?? null;
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
      void ctx.host.select(target, { fly: true });
    });
    list.append(li);
  }
  if (links.length === 0) list.append(h("li", { class: "none" }, "No links."));
  box.replaceChildren(list);
}
