/**
 * The summary strip above the 3D view: one cluster's counts and power against
 * the rack budgets (GET /api/clusters/<id>/summary/), compact so the scene gets
 * the room. DOM is built with createElement and textContent only, so names
 * typed into the admin cannot inject markup.
 */
import type { ClusterSummary } from "./api";
import { formatCount, formatPercent, formatPower } from "./format";

type Child = Node | string | null | undefined | false;

/** createElement with attributes and children; strings become text nodes. */
export function h(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    el.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

function stat(label: string, value: string, testId: string, title = ""): HTMLElement {
  return h(
    "div",
    { class: "stat", ...(title ? { title } : {}) },
    h("span", { class: "label" }, label),
    h("b", { class: "value", "data-testid": testId }, value),
  );
}

function breakdownTitle(counts: Record<string, number>): string {
  return Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k.replaceAll("_", " ")}: ${formatCount(n)}`)
    .join("\n");
}

/** Fill the summary strip (`title` = the h1, `stats` = the strip's body). */
export function renderSummary(title: HTMLElement, stats: HTMLElement, summary: ClusterSummary): void {
  const c = summary.counts;
  const p = summary.power;
  const over = p.racks_over_budget;
  const failed = (c.cards_by_status.failed ?? 0) + (c.cards_by_status.degraded ?? 0);
  title.textContent = summary.name;
  const items: Array<HTMLElement | null> = [
    stat("Cards", formatCount(c.cards), "card-count", breakdownTitle(c.cards_by_status)),
    failed
      ? h(
          "span",
          { class: "stat-note bad", title: breakdownTitle(c.cards_by_status) },
          `${formatCount(failed)} failed/degraded`,
        )
      : null,
    stat("Supernodes", formatCount(c.supernodes), "supernode-count"),
    stat("Racks", formatCount(c.racks), "rack-count"),
    stat("Servers", formatCount(c.servers), "server-count"),
    stat("Network devices", formatCount(c.devices), "device-count", breakdownTitle(c.devices_by_kind)),
    stat("Links", formatCount(c.links), "link-count", breakdownTitle(c.links_by_kind)),
    stat(
      "IT power",
      formatPower(p.it_w),
      "it-power",
      `${formatPercent(p.utilization)} of ${formatPower(p.budget_w)} rack budgets`,
    ),
    stat("Facility", formatPower(p.facility_w), "facility-power", p.pue === null ? "" : `PUE ${p.pue.toFixed(3)}`),
    h(
      "span",
      { class: `budget ${over.count ? "bad" : "fine"}`, "data-testid": "over-budget" },
      over.count
        ? `${formatCount(over.count)} rack(s) over budget: ${over.names.join(", ")}${over.count > over.names.length ? ", …" : ""}`
        : "Every rack is inside its power budget.",
    ),
  ];
  stats.replaceChildren(...items.filter((el): el is HTMLElement => el !== null));
}
