/**
 * The side panel's rack: its draw against its budget, where it stands, open
 * alerts, and its servers with a chip per card (a click selects the card).
 */
import { formatCount, formatPercent, formatPower, utilisationColour } from "../format";
import { button, dl, h } from "./dom";
import { formatNumber } from "./format";
import { alertList, errorLine, objectLink, section, type SideContext } from "./sidecommon";
import type { PaginatedAlertList, Rack, RackGeometry, SuperNode } from "../api";
import { plantRows, type RackPlant } from "../plant";

export async function showRack(ctx: SideContext, id: number, gen: number): Promise<void> {
  const [rackR, geoR, alertsR, plantR] = await Promise.allSettled([
    ctx.host.api.get<Rack>(`racks/${id}/`),
    ctx.host.api.get<RackGeometry>(`racks/${id}/geometry/`),
    ctx.host.api.get<PaginatedAlertList>(`telemetry/alerts/?rack=${id}&active=true&limit=50`),
    ctx.host.api.get<RackPlant>(`telemetry/clusters/${ctx.host.clusterId()}/racks/${id}/plant/`),
  ]);
  if (ctx.stale(gen)) return;
  if (rackR.status === "rejected") {
    ctx.body.replaceChildren(errorLine(rackR.reason));
    return;
  }
  const rack = rackR.value;
  const supernode = rack.supernode ?? null; // null: a network rack
  ctx.title.textContent = rack.name;
  let supernodeName = supernode === null ? "" : `#${supernode}`;
  if (supernode !== null) {
    try {
      supernodeName = (await ctx.host.api.get<SuperNode>(`supernodes/${supernode}/`)).name;
    } catch {
      // Keep "#id": the link still works.
    }
    if (ctx.stale(gen)) return;
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
      "Plant",
      plantR.status === "fulfilled"
        ? h("div", { "data-testid": "panel-rack-plant" }, dl(plantRows(plantR.value)))
        : h("p", { class: "muted" }, "No live plant reading (a rack without cards, or no tick yet)."),
    ),
    section(
      "Place",
      dl([
        [
          "Supernode",
          supernode === null
            ? "— (network rack)"
            : objectLink(ctx.host, { kind: "supernode", id: supernode }, supernodeName),
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
              void ctx.host.select({ kind: "card", id: c.id }, { fly: true });
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
  ctx.body.replaceChildren(...parts);
}
