/**
 * The facility panel of a cluster: a Sankey of power from the feeds through each
 * stage of the power chain (transformers, UPS, PDUs or busways, power shelves) to
 * the IT load, with each stage's conversion loss, all of it ending as heat at the
 * cooling plant; and each CDU with its load and headroom.
 *
 * Reads `GET /api/facility/sites/?cluster=<id>` and the site's
 * `GET /api/facility/sites/<id>/plant/` (every element's `input_kw`, `load_kw`,
 * `usable_kw`, `headroom_kw` from the racks' nameplate draw). The layout functions
 * are pure (vitest-covered); the Sankey is a small hand-written SVG.
 */
import { h } from "./dom";
import type { PanelHost } from "./host";
import { formatNumber } from "./format";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Power-chain kinds, upstream to downstream (simulation/facility/plant.py POWER_KINDS). */
export const POWER_STAGES = ["feed", "transformer", "ups", "pdu", "busway", "power_shelf"] as const;
const STAGE_LABELS: Record<string, string> = {
  feed: "Feeds",
  transformer: "Transformers",
  ups: "UPS",
  pdu: "PDUs",
  busway: "Busways",
  power_shelf: "Power shelves",
};

/** One stage of the chain: what its elements draw, deliver and lose (kW). */
export interface Stage {
  kind: string;
  label: string;
  count: number;
  input_kw: number;
  load_kw: number;
  loss_kw: number;
}

/** The power chain's stages present in a plant summary, upstream first. */
export function powerStages(summary: unknown): Stage[] {
  if (!isObj(summary) || !Array.isArray(summary.power)) return [];
  const power = summary.power.filter(isObj);
  return POWER_STAGES.flatMap((kind) => {
    const els = power.filter((e) => e.kind === kind);
    if (!els.length) return [];
    const input = els.reduce((s, e) => s + num(e.input_kw), 0);
    const load = els.reduce((s, e) => s + num(e.load_kw), 0);
    return [
      {
        kind,
        label: STAGE_LABELS[kind] ?? kind,
        count: els.length,
        input_kw: input,
        load_kw: load,
        loss_kw: Math.max(input - load, 0),
      },
    ];
  });
}

/** A node of the Sankey (a column bar) and a band between two nodes. */
export interface SankeyNode {
  id: string;
  label: string;
  kw: number;
  x: number;
  y: number;
  w: number;
  h: number;
}
export interface SankeyBand {
  from: string;
  to: string;
  kw: number;
  path: string;
  loss: boolean;
}
export interface Sankey {
  nodes: SankeyNode[];
  bands: SankeyBand[];
  width: number;
  height: number;
  scale: number;
}

/**
 * The layout: one column per stage, then "IT load", then "Heat rejection" (all power
 * drawn ends as heat). Band widths are kW × scale (the feed's input fills the height
 * less the loss lane). Each stage's loss leaves as a band down to its own node in
 * the loss lane at the bottom, then on to heat rejection.
 */
export function sankeyLayout(stages: Stage[], width = 560, height = 220): Sankey | null {
  if (!stages.length || stages[0].input_kw <= 0) return null;
  const top = stages[0].input_kw;
  const lane = 46; // room at the bottom for the loss nodes
  const scale = (height - lane - 8) / top;
  const cols = stages.length + 2;
  const colW = 14;
  const step = (width - colW) / (cols - 1);
  const nodes: SankeyNode[] = [];
  const bands: SankeyBand[] = [];
  const it = stages[stages.length - 1].load_kw;
  stages.forEach((s, i) => {
    nodes.push({ id: s.kind, label: s.label, kw: s.input_kw, x: i * step, y: 4, w: colW, h: s.input_kw * scale });
  });
  nodes.push({ id: "it", label: "IT load", kw: it, x: stages.length * step, y: 4, w: colW, h: it * scale });
  nodes.push({ id: "heat", label: "Heat rejection", kw: top, x: (cols - 1) * step, y: 4, w: colW, h: top * scale });
  const band = (a: SankeyNode, ay: number, b: SankeyNode, by: number, kw: number, loss: boolean): void => {
    const t = kw * scale;
    const x0 = a.x + a.w;
    const x1 = b.x;
    const mid = (x0 + x1) / 2;
    const path = `M${x0},${ay} C${mid},${ay} ${mid},${by} ${x1},${by} L${x1},${by + t} C${mid},${by + t} ${mid},${ay + t} ${x0},${ay + t} Z`;
    bands.push({ from: a.id, to: b.id, kw, path, loss });
  };
  const heat = nodes[nodes.length - 1];
  const itNode = nodes[nodes.length - 2];
  let heatY = heat.y;
  stages.forEach((s, i) => {
    const a = nodes[i];
    const next = nodes[i + 1];
    band(a, a.y, next, next.y, s.load_kw, false);
    if (s.loss_kw > 0) {
      const lossNode: SankeyNode = {
        id: `${s.kind}-loss`,
        label: `${s.label} loss`,
        kw: s.loss_kw,
        x: a.x + step / 2,
        y: height - lane + 6,
        w: colW / 2,
        h: Math.max(s.loss_kw * scale, 1),
      };
      nodes.push(lossNode);
      band(a, a.y + s.load_kw * scale, lossNode, lossNode.y, s.loss_kw, true);
    }
  });
  band(itNode, itNode.y, heat, heatY, it, false);
  heatY += it * scale;
  for (const n of nodes.filter((n) => n.id.endsWith("-loss"))) {
    band(n, n.y, heat, heatY, n.kw, true);
    heatY += n.kw * scale;
  }
  return { nodes, bands, width, height, scale };
}

/** Each CDU of the plant: load, usable capacity, headroom (kW) and utilisation. */
export function cduRows(summary: unknown): string[][] {
  if (!isObj(summary) || !Array.isArray(summary.cooling)) return [];
  return summary.cooling
    .filter(isObj)
    .filter((e) => e.kind === "cdu")
    .map((e) => {
      const u = typeof e.utilization === "number" ? `${formatNumber(e.utilization * 100)} %` : "—";
      return [
        typeof e.key === "string" ? e.key : "?",
        formatNumber(num(e.load_kw)),
        formatNumber(num(e.usable_kw)),
        formatNumber(num(e.headroom_kw)),
        u,
      ];
    });
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag: string, attrs: Record<string, string>): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

/** The Sankey as SVG (data-kw on every node and band, for tests and tooltips). */
export function renderSankey(s: Sankey): SVGElement {
  const root = svg("svg", {
    viewBox: `0 0 ${s.width} ${s.height + 14}`,
    width: "100%",
    "data-testid": "facility-sankey",
    role: "img",
    "aria-label": "Power from the feeds to IT load and heat rejection",
  });
  for (const b of s.bands) {
    const p = svg("path", {
      d: b.path,
      fill: b.loss ? "rgba(218,54,51,0.45)" : "rgba(76,141,255,0.35)",
      "data-from": b.from,
      "data-to": b.to,
      "data-kw": b.kw.toFixed(3),
      class: b.loss ? "loss" : "flow",
    });
    p.append(svg("title", {}));
    p.lastChild!.textContent = `${b.from} → ${b.to}: ${formatNumber(b.kw)} kW`;
    root.append(p);
  }
  for (const n of s.nodes) {
    root.append(
      svg("rect", {
        x: String(n.x),
        y: String(n.y),
        width: String(n.w),
        height: String(Math.max(n.h, 1)),
        fill: n.id.endsWith("-loss") ? "#da3633" : "#98a2b3",
        "data-node": n.id,
        "data-kw": n.kw.toFixed(3),
      }),
    );
    if (!n.id.endsWith("-loss")) {
      const t = svg("text", { x: String(n.x), y: String(s.height + 12), fill: "#98a2b3", "font-size": "10" });
      t.textContent = `${n.label} ${formatNumber(n.kw)} kW`;
      root.append(t);
    }
  }
  return root;
}

export interface FacilityPanel {
  reset(): Promise<void>;
}

/** The facility panel on `el` for the host's cluster (call reset() when it changes). */
export function mountFacility(el: HTMLElement, host: PanelHost): FacilityPanel {
  el.classList.add("tw-panel", "tw-facility-panel");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "facility-panel");
  const body = h("div", { "data-testid": "facility-body" });
  el.replaceChildren(h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Facility")), body);
  let generation = 0;
  return {
    async reset(): Promise<void> {
      const mine = ++generation;
      const cluster = host.clusterId();
      body.replaceChildren(h("p", { class: "tw-muted" }, "Loading…"));
      try {
        const sites = await host.api.get<{ results: { id: number }[] }>(`facility/sites/?cluster=${cluster}`);
        if (mine !== generation) return;
        if (!sites.results.length) {
          body.replaceChildren(
            h(
              "p",
              { class: "tw-muted", "data-testid": "facility-none" },
              "No facility yet: build one with manage.py build_facility.",
            ),
          );
          return;
        }
        const summary = await host.api.get<Obj>(`facility/sites/${sites.results[0].id}/plant/`);
        if (mine !== generation) return;
        const stages = powerStages(summary);
        const layout = sankeyLayout(stages);
        const losses = h(
          "table",
          { class: "tw-table", "data-testid": "facility-losses" },
          h("thead", {}, h("tr", {}, ...["stage", "in (kW)", "out (kW)", "loss (kW)"].map((c) => h("th", {}, c)))),
          h(
            "tbody",
            {},
            ...stages.map((s) =>
              h(
                "tr",
                {},
                h("td", {}, `${s.label} (${s.count})`),
                h("td", {}, formatNumber(s.input_kw)),
                h("td", {}, formatNumber(s.load_kw)),
                h("td", {}, formatNumber(s.loss_kw)),
              ),
            ),
          ),
        );
        const cdus = h(
          "table",
          { class: "tw-table", "data-testid": "facility-cdus" },
          h(
            "thead",
            {},
            h("tr", {}, ...["CDU", "load (kW)", "usable (kW)", "headroom (kW)", "use"].map((c) => h("th", {}, c))),
          ),
          h("tbody", {}, ...cduRows(summary).map((r) => h("tr", {}, ...r.map((v) => h("td", {}, v))))),
        );
        body.replaceChildren(
          h("h4", {}, "Power: feeds → IT load → heat rejection"),
          ...(layout ? [renderSankey(layout)] : []),
          h("h4", {}, "Losses per stage"),
          losses,
          h("h4", {}, "CDUs"),
          cdus,
        );
      } catch (error) {
        if (mine === generation) {
          body.replaceChildren(h("p", { class: "bad" }, `Facility unavailable: ${String(error)}`));
        }
      }
    },
  };
}
