/**
 * Renders one cluster's summary: counts, power against the rack budgets, and a
 * floor map of racks coloured by utilisation. DOM is built with createElement
 * and textContent only, so names typed into the admin cannot inject markup.
 */
import type { ClusterSummary, Page, Rack } from "./api";
import {
  formatCount,
  formatPercent,
  formatPower,
  utilisationColour,
  utilisationLevel,
} from "./format";

type Child = Node | string | null | undefined | false;

/** createElement with attributes and children; strings become text nodes. */
export function h(
  tag: string,
  attrs: Record<string, string> = {},
  ...children: Child[]
): HTMLElement {
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

const CARD_STATUS_LABELS: Record<string, string> = {
  ok: "OK",
  degraded: "Degraded",
  failed: "Failed",
  maintenance: "Maintenance",
};

function stat(label: string, value: string, testId: string, ...detail: Child[]): HTMLElement {
  return h(
    "section",
    { class: "stat" },
    h("h3", {}, label),
    h("p", { class: "value", "data-testid": testId }, value),
    detail.length ? h("div", { class: "detail" }, ...detail) : null,
  );
}

function breakdown(counts: Record<string, number>, labels: Record<string, string> = {}): HTMLElement {
  const list = h("ul", { class: "breakdown" });
  for (const [key, n] of Object.entries(counts)) {
    if (n === 0 && !(key in labels)) continue;
    list.append(
      h(
        "li",
        { class: n > 0 ? `status-${key} nonzero` : `status-${key}` },
        h("span", {}, labels[key] ?? key.replaceAll("_", " ")),
        h("b", {}, formatCount(n)),
      ),
    );
  }
  return list;
}

function powerPanel(summary: ClusterSummary): HTMLElement {
  const p = summary.power;
  const over = p.racks_over_budget;
  const util = p.utilization ?? 0;
  const bar = h("div", { class: "bar" }, h("span", {}));
  const fill = bar.firstElementChild as HTMLElement;
  fill.style.width = `${Math.min(100, util * 100).toFixed(1)}%`;
  fill.style.background = utilisationColour(p.it_w, p.budget_w || 1);
  return h(
    "section",
    { class: "panel power" },
    h("h2", {}, "Power"),
    h(
      "dl",
      {},
      h("dt", {}, "IT power (nameplate)"),
      h("dd", { "data-testid": "it-power" }, formatPower(p.it_w)),
      h("dt", {}, "Facility power (IT × PUE)"),
      h("dd", { "data-testid": "facility-power" }, formatPower(p.facility_w)),
      h("dt", {}, "Effective PUE"),
      h("dd", {}, p.pue === null ? "—" : p.pue.toFixed(3)),
      h("dt", {}, "Rack budgets"),
      h("dd", {}, formatPower(p.budget_w)),
      h("dt", {}, "Used of budget"),
      h("dd", {}, formatPercent(p.utilization)),
    ),
    bar,
    h(
      "p",
      { class: over.count ? "alert" : "fine", "data-testid": "over-budget" },
      over.count
        ? `${formatCount(over.count)} rack(s) over budget: ${over.names.join(", ")}${
            over.count > over.names.length ? ", …" : ""
          }`
        : "Every rack is inside its power budget.",
    ),
  );
}

function rackFloor(racks: Page<Rack>, total: number): HTMLElement {
  const grid = h("div", { class: "floor", "data-testid": "rack-floor" });
  const rows = new Map<number, Rack[]>();
  for (const rack of racks.results) {
    const row = rows.get(rack.row) ?? [];
    row.push(rack);
    rows.set(rack.row, row);
  }
  for (const [rowIndex, row] of [...rows.entries()].sort((a, b) => a[0] - b[0])) {
    const line = h("div", { class: "floor-row" }, h("span", { class: "row-label" }, `row ${rowIndex}`));
    for (const rack of row) {
      const cell = h("span", {
        class: `rack ${utilisationLevel(rack.power_w, rack.power_budget_w)}`,
        title:
          `${rack.name}: ${formatPower(rack.power_w)} of ${formatPower(rack.power_budget_w)} ` +
          `(${formatPercent(rack.power_w / rack.power_budget_w)})`,
      });
      cell.style.background = utilisationColour(rack.power_w, rack.power_budget_w);
      line.append(cell);
    }
    grid.append(line);
  }
  const shown = racks.results.length;
  return h(
    "section",
    { class: "panel" },
    h("h2", {}, "Rack floor"),
    h(
      "p",
      { class: "hint" },
      "Each square is a rack, coloured by its draw against its budget (green → amber → red; " +
        "purple is over budget). ",
      shown < total ? `Showing the first ${formatCount(shown)} of ${formatCount(total)} racks.` : "",
    ),
    grid,
  );
}

/** Replace `root`'s content with the dashboard of one cluster. */
export function renderSummary(root: HTMLElement, summary: ClusterSummary, racks: Page<Rack>): void {
  const c = summary.counts;
  const rps = summary.racks_per_supernode;
  const racksPerSupernode =
    rps.min === null
      ? "no supernodes"
      : rps.min === rps.max
        ? `${rps.min} per supernode`
        : `${rps.min}–${rps.max} per supernode`;
  root.replaceChildren(
    h("h1", { "data-testid": "cluster-name" }, summary.name),
    h(
      "div",
      { class: "stats" },
      stat("Accelerator cards", formatCount(c.cards), "card-count", breakdown(c.cards_by_status, CARD_STATUS_LABELS)),
      stat("Supernodes", formatCount(c.supernodes), "supernode-count"),
      stat(
        "Racks",
        formatCount(c.racks),
        "rack-count",
        h("p", {}, racksPerSupernode),
        h("p", {}, `${formatCount(rps.network_racks)} network rack(s)`),
      ),
      stat("Servers", formatCount(c.servers), "server-count"),
      stat("Network devices", formatCount(c.devices), "device-count", breakdown(c.devices_by_kind)),
      stat("Links", formatCount(c.links), "link-count", breakdown(c.links_by_kind)),
    ),
    h("div", { class: "columns" }, powerPanel(summary), rackFloor(racks, c.racks)),
  );
}

export function renderMessage(root: HTMLElement, title: string, text: string, kind = "info"): void {
  root.replaceChildren(h("section", { class: `message ${kind}` }, h("h2", {}, title), h("p", {}, text)));
}
