/** The side panel's supernode: its fabric and scale-up links, and its racks with their draw. */
import { formatCount, formatPercent, formatPower, utilisationColour } from "../format";
import { dl, h } from "./dom";
import { formatGbps, formatNs } from "./format";
import { errorLine, section, type SideContext } from "./sidecommon";
import type { PaginatedRackList, SuperNode } from "../api";

export async function showSupernode(ctx: SideContext, id: number, gen: number): Promise<void> {
  const [snR, racksR] = await Promise.allSettled([
    ctx.host.api.get<SuperNode>(`supernodes/${id}/`),
    ctx.host.api.get<PaginatedRackList>(`racks/?supernode=${id}&ordering=row,slot&limit=1000`),
  ]);
  if (ctx.stale(gen)) return;
  if (snR.status === "rejected") {
    ctx.body.replaceChildren(errorLine(snR.reason));
    return;
  }
  const sn = snR.value;
  ctx.title.textContent = sn.name;
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
      li.addEventListener("click", () => void ctx.host.select({ kind: "rack", id: r.id }, { fly: true }));
      list.append(li);
    }
    parts.push(section(`Racks (${racks.length})`, list));
  } else {
    parts.push(section("Racks", errorLine(racksR.reason)));
  }
  ctx.body.replaceChildren(...parts);
}
