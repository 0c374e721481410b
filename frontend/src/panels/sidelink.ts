/** The side panel's link: its two ends (cards link to their panel), kind, bandwidth, latency and status. */
import { chip, dl } from "./dom";
import { formatGbps, formatNs } from "./format";
import { errorLine, objectLink, section, type SideContext } from "./sidecommon";
import type { Link, NetworkDevice } from "../api";

async function endNode(
  ctx: SideContext,
  card: number | null,
  device: number | null,
  kind: string | null,
  label: string,
): Promise<Node | string> {
  if (card !== null) return objectLink(ctx.host, { kind: "card", id: card }, label);
  if (device !== null) {
    try {
      const d = await ctx.host.api.get<NetworkDevice>(`devices/${device}/`);
      return `${d.name} (${d.kind}${d.model ? `, ${d.model}` : ""})`;
    } catch {
      return `${label} (${kind ?? "device"})`;
    }
  }
  return "—";
}

export async function showLink(ctx: SideContext, id: number, gen: number): Promise<void> {
  let link: Link;
  try {
    link = await ctx.host.api.get<Link>(`links/${id}/`);
  } catch (error) {
    if (!ctx.stale(gen)) ctx.body.replaceChildren(errorLine(error));
    return;
  }
  if (ctx.stale(gen)) return;
  ctx.title.textContent = link.display;
  const [la, lb] = link.display.split(" ↔ ");
  const [a, b] = await Promise.all([
    endNode(ctx, link.a_card ?? null, link.a_device ?? null, link.a_kind, la ?? "?"),
    endNode(ctx, link.b_card ?? null, link.b_device ?? null, link.b_kind, lb ?? "?"),
  ]);
  if (ctx.stale(gen)) return;
  ctx.body.replaceChildren(
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
