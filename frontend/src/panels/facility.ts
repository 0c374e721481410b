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
 *
 * Live: each CDU loop with its flow, supply and return temperatures, heat and load
 * from the cluster view's snapshot (`facility.cdus[]`), moved by every frame after it
 * (`facility.cdu_loops`: `applyLoopFrame`; twin/live/frames.py: measured
 * readings where fresh ones exist, the model elsewhere; a leak detector's report),
 * and the plant over the last hour (PUE, IT and facility power, CDU supply) as uPlot
 * series from `GET /api/facility/history/?cluster=<id>&since=…` (one row a minute).
 */
import uPlot from "uplot";
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

/** One CDU loop as the live snapshot's `facility.cdus[]` carries it (SI units). */
export interface CduLoop {
  key: string;
  supply_c: number | null;
  return_c: number | null;
  flow_kg_s: number | null;
  heat_w: number | null;
  load_fraction: number | null;
  measured: string[];
  leaks: number | null;
}

const numOrNull = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** The CDU loops of a snapshot's `facility` section ([] when it has none). */
export function cduLoops(facility: unknown): CduLoop[] {
  if (!isObj(facility) || !Array.isArray(facility.cdus)) return [];
  return facility.cdus.filter(isObj).map((c) => ({
    key: typeof c.key === "string" ? c.key : "?",
    supply_c: numOrNull(c.supply_c),
    return_c: numOrNull(c.return_c),
    flow_kg_s: numOrNull(c.flow_kg_s),
    heat_w: numOrNull(c.heat_w),
    load_fraction: numOrNull(c.load_fraction),
    measured: Array.isArray(c.measured) ? c.measured.filter((m): m is string => typeof m === "string") : [],
    leaks: numOrNull(c.leaks),
  }));
}

/** The CDU loops after a cluster **frame**: each tick's frame carries the loops'
 * figures as columns in the snapshot's `facility.cdus` order (`cdu_loops`), the CDUs
 * measured now (`cdu_measured`) and their leak counts (`cdu_leaks`), twin/live/frames.py
 * `_facility_frame`. `prev` is what the last snapshot (or frame) gave; a frame whose
 * columns do not match it in length (another layout) leaves it as it is. */
export function applyLoopFrame(prev: CduLoop[], facility: unknown): CduLoop[] {
  if (!isObj(facility) || !isObj(facility.cdu_loops)) return prev;
  const cols = facility.cdu_loops;
  const names = ["supply_c", "return_c", "flow_kg_s", "heat_w", "load_fraction"] as const;
  if (!names.every((n) => Array.isArray(cols[n]) && (cols[n] as unknown[]).length === prev.length)) return prev;
  const measured = isObj(facility.cdu_measured) ? facility.cdu_measured : {};
  const leaks = isObj(facility.cdu_leaks) ? facility.cdu_leaks : {};
  return prev.map((c, i) => {
    const m = measured[c.key];
    const next: CduLoop = {
      ...c,
      measured: Array.isArray(m) ? m.filter((q): q is string => typeof q === "string") : [],
      leaks: numOrNull(leaks[c.key]),
    };
    for (const n of names) next[n] = numOrNull((cols[n] as unknown[])[i]);
    return next;
  });
}

/** A loop's table cells: CDU, supply, return, ΔT (°C), flow (kg/s), heat (kW), load,
 * leak; a measured figure is marked "•" (the model's figure otherwise). */
export function loopRow(c: CduLoop): string[] {
  const f = (v: number | null, q: string, digits = 1): string =>
    v === null ? "—" : `${v.toFixed(digits)}${c.measured.includes(q) ? " •" : ""}`;
  const dt = c.supply_c !== null && c.return_c !== null ? (c.return_c - c.supply_c).toFixed(1) : "—";
  return [
    c.key,
    f(c.supply_c, "supply_c"),
    f(c.return_c, "return_c"),
    dt,
    f(c.flow_kg_s, "flow_kg_s", 2),
    c.heat_w === null ? "—" : f(c.heat_w / 1000, "heat_w"),
    c.load_fraction === null ? "—" : `${formatNumber(c.load_fraction * 100)} %`,
    c.leaks === null ? "—" : c.leaks > 0 ? `LEAK (${c.leaks})` : "dry",
  ];
}

/** The plant's last hour as aligned series (x: Unix seconds of each minute). */
export interface PlantSeries {
  x: number[];
  pue: Array<number | null>;
  it_kw: Array<number | null>;
  facility_kw: Array<number | null>;
  supply_c: Array<number | null>;
}

/** Minute rows of `GET /api/facility/history/` → series; the supply is the mean over
 * the CDUs that report one (null where none does). Rows without a time are dropped. */
export function plantSeries(rows: unknown): PlantSeries {
  const out: PlantSeries = { x: [], pue: [], it_kw: [], facility_kw: [], supply_c: [] };
  if (!Array.isArray(rows)) return out;
  for (const r of rows.filter(isObj)) {
    const t = typeof r.minute === "string" ? Date.parse(r.minute) : NaN;
    if (!Number.isFinite(t)) continue;
    out.x.push(t / 1000);
    out.pue.push(numOrNull(r.pue));
    const it = numOrNull(r.it_w);
    const fac = numOrNull(r.facility_w);
    out.it_kw.push(it === null ? null : it / 1000);
    out.facility_kw.push(fac === null ? null : fac / 1000);
    const sup = (Array.isArray(r.cdus) ? r.cdus : [])
      .filter(isObj)
      .map((c) => numOrNull(c.supply_c))
      .filter((v): v is number => v !== null);
    out.supply_c.push(sup.length ? sup.reduce((a, b) => a + b, 0) / sup.length : null);
  }
  return out;
}

const HISTORY_S = 3600;
const HISTORY_REFRESH_MS = 60_000;

function historyChart(
  box: HTMLElement,
  x: number[],
  yLabel: string,
  series: Array<[string, Array<number | null>, string]>,
): uPlot {
  const axis = {
    stroke: "#98a2b3",
    grid: { stroke: "rgba(255,255,255,0.07)", width: 1 },
    ticks: { stroke: "rgba(255,255,255,0.15)", width: 1 },
  };
  box.dataset.points = String(x.length);
  box.dataset.series = String(series.length);
  return new uPlot(
    {
      width: Math.max(260, Math.floor(box.clientWidth || 420)),
      height: 140,
      axes: [axis, { ...axis, label: yLabel, size: 56 }],
      series: [{}, ...series.map(([label, , stroke]) => ({ label, stroke, width: 1.5 }))],
    },
    [x, ...series.map(([, y]) => y)] as uPlot.AlignedData,
    box,
  );
}

export interface FacilityPanel {
  reset(): Promise<void>;
  /** A live message: its `facility` section (cluster-view snapshots) redraws the loops. */
  frame(msg: unknown): void;
}

/** The facility panel on `el` for the host's cluster (call reset() when it changes). */
export function mountFacility(el: HTMLElement, host: PanelHost): FacilityPanel {
  el.classList.add("tw-panel", "tw-facility-panel");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "facility-panel");
  const body = h("div", { "data-testid": "facility-body" });
  const loopsBody = h("tbody", {});
  const loops = h(
    "section",
    { "data-testid": "facility-loops", hidden: "" },
    h("h4", {}, "CDU loops (live; • measured)"),
    h(
      "table",
      { class: "tw-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["CDU", "supply °C", "return °C", "ΔT", "flow kg/s", "heat kW", "load", "leak"].map((c) => h("th", {}, c)),
        ),
      ),
      loopsBody,
    ),
  );
  const history = h("section", { "data-testid": "facility-history" });
  el.replaceChildren(
    h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Facility")),
    body,
    loops,
    history,
  );
  let generation = 0;
  let plots: uPlot[] = [];
  let timer: number | null = null;
  let shownCluster: number | null = null;
  let loopRows: CduLoop[] = [];
  const loadHistory = async (mine: number, cluster: number): Promise<void> => {
    const since = new Date(Date.now() - HISTORY_S * 1000).toISOString();
    try {
      const page = await host.api.get<{ results: unknown[] }>(
        `facility/history/?cluster=${cluster}&since=${encodeURIComponent(since)}`,
      );
      if (mine !== generation) return;
      const s = plantSeries(page.results);
      plots.forEach((p) => p.destroy());
      plots = [];
      if (!s.x.length) {
        history.replaceChildren(
          h("h4", {}, "Last hour"),
          h("p", { class: "tw-muted", "data-testid": "facility-history-empty" }, "No plant minute recorded yet."),
        );
        return;
      }
      const power = h("div", { class: "tw-chart", "data-testid": "facility-history-power" });
      const pue = h("div", { class: "tw-chart", "data-testid": "facility-history-pue" });
      const supply = h("div", { class: "tw-chart", "data-testid": "facility-history-supply" });
      history.replaceChildren(h("h4", {}, "Last hour"), power, pue, supply);
      plots = [
        historyChart(power, s.x, "kW", [
          ["IT", s.it_kw, "#4c8dff"],
          ["facility", s.facility_kw, "#d29922"],
        ]),
        historyChart(pue, s.x, "PUE", [["PUE", s.pue, "#2ea043"]]),
        historyChart(supply, s.x, "°C", [["CDU supply (mean)", s.supply_c, "#da3633"]]),
      ];
    } catch (error) {
      if (mine === generation) {
        history.replaceChildren(h("p", { class: "bad" }, `Plant history unavailable: ${String(error)}`));
      }
    }
  };
  return {
    frame(msg: unknown): void {
      if (!isObj(msg) || !isObj(msg.facility)) return;
      shownCluster = host.clusterId();
      // a snapshot lists the loops (keys and figures); each frame after it moves them
      const rows = Array.isArray(msg.facility.cdus) ? cduLoops(msg.facility) : applyLoopFrame(loopRows, msg.facility);
      loopRows = rows;
      loopsBody.replaceChildren(
        ...rows.map((c) =>
          h(
            "tr",
            { "data-cdu": c.key, ...(c.leaks !== null && c.leaks > 0 ? { class: "bad" } : {}) },
            ...loopRow(c).map((v) => h("td", {}, v)),
          ),
        ),
      );
      loops.hidden = rows.length === 0;
    },
    async reset(): Promise<void> {
      const mine = ++generation;
      const cluster = host.clusterId();
      body.replaceChildren(h("p", { class: "tw-muted" }, "Loading…"));
      if (cluster !== shownCluster) {
        // another cluster: its first snapshot redraws the loops (one of this cluster
        // may have arrived already, while the scene was being set up: keep it)
        loopsBody.replaceChildren();
        loops.hidden = true;
        loopRows = [];
        shownCluster = cluster;
      }
      if (timer !== null) window.clearInterval(timer);
      timer = window.setInterval(() => void loadHistory(mine, cluster), HISTORY_REFRESH_MS);
      void loadHistory(mine, cluster);
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
