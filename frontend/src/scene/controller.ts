/**
 * The dashboard's 3D core: which view is shown, what it is coloured by, the
 * live stream feeding it, and the PanelHost the side panels talk to.
 *
 * Level of detail: a cluster opens as its floor (one value per rack, however
 * many cards); a supernode's or rack's geometry is fetched only when it is
 * opened, and the last few are kept so going back and forth is instant.
 */
import { Vector3 } from "three";

import { ApiError, type Api, type Floor, type RackGeometry, type SupernodeGeometry } from "../api";
import {
  HEALTH_METRIC,
  autoDomain,
  compile,
  cssGradient,
  legendOf,
  scaleFor,
  type MetricLike,
  type Palette,
} from "../colour";
import { ViewFrames, type FrameMessage, type Subscription, type ViewKind } from "../frames";
import { formatValue } from "../format";
import type { TwinHook } from "../hook";
import { RACK, wrapStubs } from "../layout";
import type { ConnectionState, HelloMessage, LiveClient } from "../live";
import type { MetricInfo, ObjectKind, PanelHost, RouteResult, Selection } from "../panels/host";
import type { AlertsPanel, RoutePanel, ScenariosPanel, SidePanel } from "../panels";
import type { StatusBar } from "../statusbar";
import { Engine, WebGLUnavailable } from "./engine";
import { FloorView } from "./floor";
import { RackView } from "./rack";
import { SupernodeView } from "./supernode";
import type { InstancedView, RoutePoint } from "./view";

type AnyView = FloorView | SupernodeView | RackView;

interface CardInfo {
  id: number;
  supernode: number | null;
  rack: number | null;
  serial: string;
}

export interface Panels {
  side: Pick<SidePanel, "show" | "hide"> | null;
  alerts: Pick<AlertsPanel, "reset" | "push"> | null;
  route: Pick<RoutePanel, "setEnd" | "reset"> | null;
  scenarios: Pick<ScenariosPanel, "reset"> | null;
}

export interface ControllerElements {
  scene: HTMLElement;
  legend: HTMLElement;
  tooltip: HTMLElement;
  message: HTMLElement;
  crumbs: HTMLElement;
  viewSelect: HTMLSelectElement;
  metricSelect: HTMLSelectElement;
  drill: HTMLButtonElement;
  home: HTMLButtonElement;
}

/** Metrics shown first in the picker (the issue's list), the rest follow. */
const KEY_METRICS = ["power_w", "gpu_util", "gpu_temp_c", "hbm_used_gib", "health"];
const GEOMETRY_CACHE = 8;
const LEVEL: Record<string, number> = {
  pcie_switch: 1,
  pcie: 1,
  nic: 2,
  smart_nic: 2,
  leaf: 3,
  switch: 3,
  spine: 4,
  core: 5,
};

class Lru<V> {
  private readonly map = new Map<number, V>();
  constructor(private readonly size: number) {}
  get(key: number): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: number, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.size) this.map.delete(this.map.keys().next().value as number);
  }
  clear(): void {
    this.map.clear();
  }
}

export class Controller implements PanelHost {
  readonly engine: Engine | null;
  panels: Panels = { side: null, alerts: null, route: null, scenarios: null };
  live: LiveClient | null = null;
  /** Called when the view or metric changes (the page keeps them in the URL). */
  onChange: (view: { kind: ViewKind; id: number | null; metric: string }) => void = () => {};

  private cluster = 0;
  private floor: Floor | null = null;
  private floorRequest: Promise<Floor> | null = null;
  private view: AnyView | null = null;
  private frames: ViewFrames | null = null;
  private metricKey = "power_w";
  private metricList: MetricInfo[] = [];
  private palette: Palette | null = null;
  private budgets: Float64Array | null = null;
  private selection: Selection | null = null;
  private lastSupernode: number | null = null;
  private lastRack: number | null = null;
  private openToken = 0;
  private readonly snCache = new Lru<SupernodeGeometry>(GEOMETRY_CACHE);
  private readonly rackCache = new Lru<RackGeometry>(GEOMETRY_CACHE);
  private readonly cards = new Map<number, CardInfo>();
  private routeShown: RouteResult | null = null;
  private hoverPending = false;
  private hoverAt: { x: number; y: number } | null = null;

  constructor(
    readonly api: Api,
    private readonly el: ControllerElements,
    private readonly hook: TwinHook,
    private readonly status: StatusBar,
  ) {
    let engine: Engine | null = null;
    try {
      engine = new Engine(el.scene);
    } catch (error) {
      const text = error instanceof WebGLUnavailable ? error.message : `The 3D view could not start: ${String(error)}`;
      this.message(
        `${text}. The panels on the right still work; try another browser or enable hardware acceleration.`,
        "error",
      );
      el.scene.classList.add("no-webgl");
    }
    this.engine = engine;
    if (engine) this.listen(engine);
    el.metricSelect.addEventListener("change", () => this.setMetric(el.metricSelect.value));
    el.viewSelect.addEventListener("change", () => void this.onViewSelect());
    el.drill.addEventListener("click", () => void this.drill());
    el.home.addEventListener("click", () => this.goHome());
  }

  private static prefetched: { cluster: number; request: Promise<Floor> } | null = null;

  /** Start loading a cluster's floor before the page is up (the URL names it). */
  static prefetchFloor(api: Api, clusterId: number): void {
    const request = api.floor(clusterId);
    request.catch(() => undefined);
    Controller.prefetched = { cluster: clusterId, request };
  }

  private static takeFloor(api: Api, clusterId: number): Promise<Floor> {
    const p = Controller.prefetched;
    Controller.prefetched = null;
    return p && p.cluster === clusterId ? p.request : api.floor(clusterId);
  }

  // -- PanelHost ---------------------------------------------------------------
  clusterId(): number {
    return this.cluster;
  }

  metrics(): MetricInfo[] {
    return this.metricList;
  }

  metric(): string {
    return this.metricKey;
  }

  async select(sel: Selection, opts: { fly?: boolean } = {}): Promise<void> {
    const fly = opts.fly ?? true;
    this.selection = sel;
    let switched = false;
    try {
      switched = await this.showHolder(sel);
    } catch (error) {
      // The object's view could not be opened (deleted, no permission): still show the panel.
      console.warn("could not open the view of", sel, error);
    }
    const view = this.view;
    if (view && this.selection === sel) {
      view.mark(sel.kind, sel.id);
      const where = view.locate(sel.kind, sel.id);
      if (where && this.engine && (fly || switched)) {
        const distance = Math.max(this.engine.fitDistance(where.radius) * (sel.kind === "supernode" ? 1.1 : 3.2), 2.5);
        void this.engine.flyTo(where.centre, distance);
      }
      this.engine?.invalidate();
      this.updateDrill();
    }
    if (sel.kind === "rack") this.lastRack = sel.id;
    if (sel.kind === "supernode") this.lastSupernode = sel.id;
    await this.panels.side?.show(sel);
  }

  /** The side panel was closed: drop the outline and the drill button. */
  clearSelection(): void {
    this.selection = null;
    this.view?.mark(null, null);
    this.updateDrill();
    this.engine?.invalidate();
  }

  async showRoute(route: RouteResult | null): Promise<void> {
    this.routeShown = route;
    this.hook.route = route
      ? { cards: [...route.cards], links: route.links.filter((l): l is number => l !== null) }
      : null;
    if (!route || !route.reachable || route.cards.length === 0) {
      this.view?.showRoute(null);
      this.engine?.invalidate();
      return;
    }
    const infos = await Promise.all(route.cards.map((id) => this.cardInfo(id)));
    if (this.routeShown !== route) return;
    const supernodes = new Set(infos.map((c) => c.supernode));
    if (supernodes.size === 1 && infos[0].supernode !== null) {
      const sn = infos[0].supernode;
      if (!(this.view instanceof SupernodeView && this.view.id === sn)) await this.open("supernode", sn);
    } else if (!(this.view instanceof FloorView)) {
      await this.open("cluster", null);
    }
    if (this.routeShown !== route) return;
    this.drawRoute();
    // The hops between cards are drawn above them: keep the whole path in view.
    const view = this.view;
    if (view && this.engine) {
      const sphere = view.routeBounds();
      if (sphere.radius > view.bounds.radius * 1.02) this.engine.home(sphere, view.homeDirection);
    }
  }

  // -- cluster -------------------------------------------------------------------
  /** Show another cluster: its floor (or the view asked for), live stream reset. */
  async setCluster(
    clusterId: number,
    want: { kind: ViewKind; id: number | null; metric: string | null },
    live: LiveClient,
  ): Promise<void> {
    this.live?.stop();
    this.live = live;
    this.cluster = clusterId;
    this.floor = null;
    this.snCache.clear();
    this.rackCache.clear();
    this.cards.clear();
    this.selection = null;
    this.routeShown = null;
    this.hook.route = null;
    this.lastSupernode = null;
    this.lastRack = null;
    this.hook.ready = false;
    this.panels.side?.hide();
    this.panels.route?.reset();
    this.status.reset();
    if (want.metric) this.metricKey = want.metric;
    // The floor is needed by every view (names, the way back); ask for it now, in
    // parallel with the metric list, which only labels things and can come later.
    this.floorRequest = Controller.takeFloor(this.api, clusterId).then((floor) => {
      if (this.cluster === clusterId) {
        this.floor = floor;
        this.renderCrumbs();
      }
      return floor;
    });
    this.floorRequest.catch(() => undefined);
    if (this.metricList.length === 0) {
      void this.loadMetrics().then(() => {
        this.fillMetricSelect();
        this.renderLegend();
      });
    }
    this.fillMetricSelect();
    live.start();
    const panels = Promise.allSettled([this.panels.alerts?.reset(), this.panels.scenarios?.reset()]);
    try {
      await this.open(want.kind, want.id);
    } catch (error) {
      if (want.kind !== "cluster") {
        console.warn(`could not open ${want.kind} ${want.id}; showing the cluster`, error);
        await this.open("cluster", null);
      } else {
        throw error;
      }
    }
    await panels; // resolves when the cluster is fully shown: view and panels
  }

  /** Live: the connection state changed. */
  connection(state: ConnectionState, reason?: string): void {
    if (state === "offline" && reason === "unauthenticated") {
      this.status.setState(state, "Logged out");
      this.message(
        "Your session has ended: log in again to see live data.",
        "error",
        "/login/?next=" + encodeURIComponent(location.pathname + location.search),
        "Log in",
        "connection",
      );
    } else if (state === "offline" && reason === "not-found") {
      this.status.setState(state, "Cluster gone");
      this.message(
        "This cluster no longer exists: pick another one in the header.",
        "error",
        undefined,
        undefined,
        "connection",
      );
    } else {
      this.status.setState(state);
      if (state === "live" && this.el.message.dataset.source === "connection") this.message(null);
    }
  }

  /** Live: hello — the metric list as the server streams it. */
  hello(hello: HelloMessage): void {
    this.metricList = hello.metrics.map((m) => ({ key: m.key, label: m.label, unit: m.unit, aggregate: m.aggregate }));
    this.fillMetricSelect();
  }

  /** Live: a snapshot or frame. */
  frame(msg: FrameMessage): void {
    const view = this.view;
    const frames = this.frames;
    if (!view || !frames) return;
    const t0 = performance.now();
    if (!frames.apply(msg)) return;
    if (msg.type === "snapshot" && msg.view === "cluster" && frames.budget.some((b) => b === b)) {
      this.budgets = frames.budget;
    }
    this.paint(msg.type === "snapshot");
    this.hook.lastColourUpdateMs = performance.now() - t0;
    if (view instanceof RackView && frames.sub?.metric === "power_w") {
      // The power bar follows the cards' readings (redrawn only when it moves by ≥ 1 W).
      const draw = Math.round(view.liveDraw(frames.values));
      if (draw !== view.drawW) view.setPower(draw);
    }
    this.hook.frames += 1;
    this.status.frame();
    if (msg.ts) this.status.setDetail(`tick ${msg.seq} · ${new Date(msg.ts * 1000).toLocaleTimeString()}`);
    this.engine?.invalidate();
  }

  // -- views -------------------------------------------------------------------------
  /** Switch to a view (the UI's breadcrumbs, a double-click, `twin.open`). */
  async open(kind: ViewKind, id: number | null): Promise<void> {
    const token = ++this.openToken;
    this.hook.ready = false;
    this.el.scene.setAttribute("aria-busy", "true");
    try {
      let view: AnyView;
      if (kind === "cluster") {
        const floor = this.floor ?? (await (this.floorRequest ?? this.api.floor(this.cluster)));
        this.floor = floor;
        if (token !== this.openToken) return;
        performance.mark("twin:floor-loaded");
        view = new FloorView(floor);
      } else if (kind === "supernode") {
        const sid = id ?? this.lastSupernode ?? this.floor?.supernodes.id[0] ?? null;
        if (sid === null) throw new Error("no supernode to open");
        let g = this.snCache.get(sid);
        if (!g) {
          g = await this.api.supernodeGeometry(sid);
          this.snCache.set(sid, g);
        }
        if (token !== this.openToken) return;
        if (g.cluster !== this.cluster) throw new Error(`supernode ${sid} is not in this cluster`);
        view = new SupernodeView(g);
        this.lastSupernode = sid;
        g.cards.id.forEach((cid, i) =>
          this.cards.set(cid, { id: cid, supernode: sid, rack: g.cards.rack[i], serial: g.cards.serial[i] }),
        );
      } else {
        const rid = id ?? this.lastRack ?? null;
        if (rid === null) throw new Error("no rack to open");
        let g = this.rackCache.get(rid);
        if (!g) {
          g = await this.api.rackGeometry(rid);
          this.rackCache.set(rid, g);
        }
        if (token !== this.openToken) return;
        if (g.cluster !== this.cluster) throw new Error(`rack ${rid} is not in this cluster`);
        view = new RackView(g);
        this.lastRack = rid;
        if (g.supernode !== null) this.lastSupernode = g.supernode;
        for (const s of g.servers)
          for (const c of s.cards)
            this.cards.set(c.id, { id: c.id, supernode: g.supernode, rack: rid, serial: c.serial });
      }
      performance.mark(`twin:${kind}-built`);
      this.install(view);
    } finally {
      if (token === this.openToken) this.el.scene.removeAttribute("aria-busy");
    }
    if (!this.engine) return; // no WebGL: nothing is drawn, so never "ready"
    await this.engine.nextFrame();
    if (token === this.openToken) {
      this.hook.ready = true;
      if (this.hook.firstFrameMs === null && this.engine?.firstFrameAt != null)
        this.hook.firstFrameMs = this.engine.firstFrameAt;
    }
  }

  private install(view: AnyView): void {
    this.el.tooltip.hidden = true;
    const old = this.view;
    this.view = view;
    if (this.engine) {
      this.engine.setContent(view.root);
      this.engine.home(view.bounds, view.homeDirection);
    }
    old?.dispose();
    if (this.metricKey === "health" && view.kind === "cluster") this.metricKey = "power_w";
    this.budgets = view instanceof FloorView ? Float64Array.from(view.floor.racks.budget_w) : null;
    this.frames = new ViewFrames(view.keys);
    this.subscribe();
    this.paint(true);
    if (this.selection) view.mark(this.selection.kind, this.selection.id);
    if (this.routeShown) this.drawRoute();
    this.hook.view = { kind: view.kind, id: view.id, metric: this.metricKey };
    this.el.viewSelect.value = view.kind;
    this.fillMetricSelect();
    this.renderCrumbs();
    this.updateDrill();
    this.onChange(this.hook.view);
  }

  private subscribe(): void {
    const view = this.view;
    if (!view || !this.frames) return;
    // Health travels with every card frame: subscribe to a cheap metric and read the codes.
    const metric = this.metricKey === "health" ? "gpu_util" : this.metricKey;
    const sub: Subscription = { view: view.kind, id: view.id, metric };
    this.frames.follow(sub);
    // A rack without cards has no live values (the server would refuse the view).
    if (view.keys.length === 0) this.live?.unsubscribe();
    else this.live?.subscribe(sub);
  }

  setMetric(key: string): void {
    if (key === this.metricKey) return;
    this.metricKey = key === "health" && this.view?.kind === "cluster" ? "power_w" : key;
    this.el.metricSelect.value = this.metricKey;
    this.el.tooltip.hidden = true;
    this.subscribe();
    this.paint(true);
    this.engine?.invalidate();
    this.hook.view = { ...this.hook.view, metric: this.metricKey };
    this.onChange(this.hook.view);
  }

  private metricInfo(key: string): MetricLike {
    if (key === "health") return HEALTH_METRIC;
    return this.metricList.find((m) => m.key === key) ?? { key, label: key, unit: "" };
  }

  /** Recolour the view from the live values (recompiling the scale when it must change). */
  private paint(rescale: boolean): void {
    const view = this.view;
    const frames = this.frames;
    if (!view || !frames) return;
    const health = this.metricKey === "health";
    const values = health ? frames.health : frames.values;
    let palette = this.palette;
    if (rescale || !palette || palette.scale.metric !== this.metricKey) {
      const scale = scaleFor(this.metricInfo(this.metricKey), view.kind);
      if (scale.kind === "sequential" && scale.auto) scale.domain = autoDomain(values) ?? scale.domain;
      palette = compile(scale);
      this.palette = palette;
      this.renderLegend();
    } else if (palette.scale.kind === "sequential" && palette.scale.auto) {
      // Grow (never shrink) an auto domain between snapshots, so colours stay comparable.
      const [lo, hi] = autoDomain(values) ?? palette.scale.domain;
      const [clo, chi] = palette.scale.domain;
      if (hi > chi || lo < clo) {
        const scale = { ...palette.scale, domain: [Math.min(lo, clo), Math.max(hi, chi)] as [number, number] };
        palette = compile(scale);
        this.palette = palette;
        this.renderLegend();
      }
    }
    const budgets =
      palette.scale.kind === "sequential" && palette.scale.ratio ? (this.budgets ?? undefined) : undefined;
    view.recolour(palette, values, budgets);
  }

  private renderLegend(): void {
    const legendEl = this.el.legend;
    const palette = this.palette;
    if (!palette) return;
    const legend = legendOf(palette, this.view instanceof FloorView && this.view.fixed?.some((c) => c >= 0));
    const parts: HTMLElement[] = [];
    const title = document.createElement("div");
    title.className = "legend-title";
    title.textContent = legend.title;
    parts.push(title);
    if (legend.gradient.length) {
      const bar = document.createElement("div");
      bar.className = "legend-bar";
      bar.style.background = cssGradient(legend);
      const ticks = document.createElement("div");
      ticks.className = "legend-ticks";
      for (const [offset, text] of legend.ticks) {
        const t = document.createElement("span");
        t.textContent = text;
        t.style.left = `${offset * 100}%`;
        ticks.append(t);
      }
      parts.push(bar, ticks);
    }
    const list = document.createElement("ul");
    list.className = "legend-swatches";
    for (const s of legend.swatches) {
      const li = document.createElement("li");
      const sw = document.createElement("i");
      sw.style.background = s.colour;
      li.append(sw, document.createTextNode(s.label));
      list.append(li);
    }
    parts.push(list);
    legendEl.replaceChildren(...parts);
    legendEl.dataset.metric = this.metricKey;
  }

  // -- test hook ----------------------------------------------------------------------
  keys(): number[] {
    return this.view ? [...this.view.keys] : [];
  }

  colourOf(key: number): string | null {
    const view = this.view;
    const i = view?.instanceOf.get(key);
    if (!view || i === undefined || !this.palette) return null;
    return this.palette.hex[view.codes[i]] ?? null;
  }

  valueOf(key: number): number | null {
    return this.frames ? this.frames.valueOf(key, this.metricKey === "health") : null;
  }

  /** Where a click hits the instance `key` (its centre, else a visible part of it). */
  screenOf(key: number): { x: number; y: number } | null {
    const view = this.view;
    const engine = this.engine;
    const i = view?.instanceOf.get(key);
    if (!view || !engine || i === undefined) return null;
    engine.camera.updateMatrixWorld();
    const centre = view.centreOf(i);
    const sx = view.sizes[i * 3] * 0.35;
    const sy = view.sizes[i * 3 + 1] * 0.35;
    const sz = view.sizes[i * 3 + 2] * 0.35;
    const offsets = [
      [0, 0, 0],
      [0, sy, sz],
      [-sx, 0, sz],
      [sx, 0, sz],
      [0, -sy, sz],
      [0, sy, 0],
      [-sx, sy, 0],
      [sx, sy, 0],
      [-sx, 0, 0],
      [sx, 0, 0],
    ];
    for (const [ox, oy, oz] of offsets) {
      const p = engine.project(centre.clone().add(new Vector3(ox, oy, oz)));
      if (!p) continue;
      if (!engine.aim(p.x, p.y)) continue;
      const hit = view.pick(engine.raycaster);
      if (hit && hit.kind === view.instanceKind() && hit.id === key)
        return { x: Math.round(p.x * 10) / 10, y: Math.round(p.y * 10) / 10 };
    }
    return null;
  }

  highlighted(): number {
    return this.view ? this.view.routeDrawn() : 0;
  }

  // -- route -------------------------------------------------------------------------
  private async cardInfo(id: number): Promise<CardInfo> {
    const known = this.cards.get(id);
    if (known) return known;
    const card = await this.api.get<{ id: number; supernode: number | null; rack: number | null; serial: string }>(
      `cards/${id}/`,
    );
    const info = { id: card.id, supernode: card.supernode, rack: card.rack, serial: card.serial };
    this.cards.set(id, info);
    return info;
  }

  /**
   * Draw the shown route in the current view: card nodes at their card (or,
   * on the floor, their rack's top); the nodes between cards (NICs, switches)
   * lifted above the line between the cards around them, higher for higher tiers.
   */
  private drawRoute(): void {
    const view = this.view;
    const route = this.routeShown;
    if (!view || !route) return;
    const cardPos: Array<Vector3 | null> = [];
    const cardInst: Array<number | null> = [];
    for (const node of route.path) {
      if (node.card === null) {
        cardPos.push(null);
        cardInst.push(null);
        continue;
      }
      if (view instanceof FloorView) {
        const rack = this.cards.get(node.card)?.rack;
        const i = rack === undefined || rack === null ? undefined : view.instanceOf.get(rack);
        cardPos.push(i === undefined ? null : view.centreOf(i).add(new Vector3(0, RACK.h / 2 + 0.15, 0)));
        cardInst.push(i ?? null);
      } else {
        const i = view.instanceOf.get(node.card);
        cardPos.push(i === undefined ? null : view.centreOf(i));
        cardInst.push(i ?? null);
      }
    }
    const top = this.topOf(view);
    const step =
      view instanceof FloorView
        ? Math.max(1.2, (view.layout.x1 - view.layout.x0) / 40)
        : view instanceof RackView
          ? 0.25
          : 0.6;
    const points: RoutePoint[] = [];
    route.path.forEach((node, k) => {
      let p = cardPos[k];
      if (!p) {
        let a = k - 1;
        while (a >= 0 && !cardPos[a]) a--;
        let b = k + 1;
        while (b < route.path.length && !cardPos[b]) b++;
        const pa = a >= 0 ? cardPos[a] : null;
        const pb = b < route.path.length ? cardPos[b] : null;
        const base = pa && pb ? pa.clone().lerp(pb, (k - a) / (b - a)) : (pa ?? pb ?? new Vector3()).clone();
        const level = LEVEL[node.kind] ?? 3;
        base.y = top + step * level;
        p = base;
      }
      const point: RoutePoint = { position: p, instance: cardInst[k] ?? null };
      const prev = k > 0 ? cardInst[k - 1] : null;
      const here = cardInst[k];
      if (
        view instanceof SupernodeView &&
        prev !== null &&
        prev !== undefined &&
        here !== null &&
        here !== undefined &&
        view.wraps(prev, here)
      ) {
        const [ea, eb] = wrapStubs(points[k - 1].position.toArray(), p.toArray());
        point.wrapStubs = [new Vector3().fromArray(ea), new Vector3().fromArray(eb)];
      }
      points.push(point);
    });
    view.showRoute(points);
    this.engine?.invalidate();
  }

  private topOf(view: InstancedView): number {
    let top = 0;
    for (let i = 0; i < view.keys.length; i++) top = Math.max(top, view.centres[i * 3 + 1] + view.sizes[i * 3 + 1] / 2);
    return top;
  }

  // -- interaction ---------------------------------------------------------------------
  private listen(engine: Engine): void {
    const canvas = engine.renderer.domElement;
    let down: { x: number; y: number; t: number } | null = null;
    canvas.addEventListener("pointerdown", (e) => {
      down = { x: e.clientX, y: e.clientY, t: performance.now() };
    });
    canvas.addEventListener("pointerup", (e) => {
      if (!down || e.button !== 0) return;
      const moved = Math.hypot(e.clientX - down.x, e.clientY - down.y);
      down = null;
      if (moved > 5) return;
      const hit = this.pickAt(e.clientX, e.clientY);
      if (hit) void this.select({ kind: hit.kind, id: hit.id }, { fly: false });
    });
    canvas.addEventListener("dblclick", (e) => {
      const hit = this.pickAt(e.clientX, e.clientY);
      if (!hit) return;
      void this.drillInto(hit.kind, hit.id);
    });
    canvas.addEventListener("pointermove", (e) => {
      this.hoverAt = { x: e.clientX, y: e.clientY };
      if (this.hoverPending) return;
      this.hoverPending = true;
      requestAnimationFrame(() => {
        this.hoverPending = false;
        this.hover();
      });
    });
    canvas.addEventListener("pointerleave", () => {
      this.hoverAt = null;
      this.el.tooltip.hidden = true;
    });
  }

  /** The rack view's power bar (the test hook's rackDraw). */
  rackDraw(): number | null {
    return this.view instanceof RackView ? this.view.drawW : null;
  }

  /** What a click at CSS px (x, y) would select (the test hook's pickAt). */
  pickObjectAt(x: number, y: number): { kind: ObjectKind; id: number } | null {
    const hit = this.pickAt(x, y);
    return hit ? { kind: hit.kind, id: hit.id } : null;
  }

  private pickAt(x: number, y: number): { kind: ObjectKind; id: number; index: number } | null {
    const engine = this.engine;
    const view = this.view;
    if (!engine || !view || !engine.aim(x, y)) return null;
    return view.pick(engine.raycaster);
  }

  private hover(): void {
    const tip = this.el.tooltip;
    const at = this.hoverAt;
    const view = this.view;
    if (!at || !view) {
      tip.hidden = true;
      return;
    }
    const hit = this.pickAt(at.x, at.y);
    if (!hit) {
      tip.hidden = true;
      this.el.scene.style.cursor = "";
      return;
    }
    this.el.scene.style.cursor = "pointer";
    let text: string;
    if (hit.kind === "supernode" && view instanceof FloorView) {
      text = view.describeSupernode(hit.id);
    } else if (hit.kind === "link" && view instanceof SupernodeView) {
      const L = view.geometry.links;
      text = `link ${L.id[hit.index]} · ${L.kind[hit.index].replaceAll("_", " ")} · ${L.status[hit.index]}${L.wrap?.[hit.index] ? " · wrap-around" : ""}`;
    } else {
      const metric = this.metricInfo(this.metricKey);
      const v = this.valueOf(hit.id);
      const shown =
        this.metricKey === "health"
          ? v === null
            ? "no data"
            : (["unknown", "ok", "warning", "critical", "stale"][v] ?? String(v))
          : formatValue(v, this.frames?.unit || metric.unit);
      text = `${view.describe(hit.index)} — ${metric.label}: ${shown}`;
    }
    tip.textContent = text;
    const rect = this.el.scene.getBoundingClientRect();
    tip.style.left = `${Math.min(at.x - rect.left + 14, rect.width - 260)}px`;
    tip.style.top = `${at.y - rect.top + 14}px`;
    tip.hidden = false;
  }

  /** Double-click: a rack or supernode opens its supernode (a network rack: the rack); a card its rack. */
  private async drillInto(kind: ObjectKind, id: number): Promise<void> {
    const view = this.view;
    if (kind === "rack" && view instanceof FloorView) {
      const i = view.instanceOf.get(id);
      const sn = i === undefined ? null : view.supernodeOf(i);
      if (sn !== null) await this.open("supernode", sn);
      else await this.open("rack", id);
    } else if (kind === "supernode") {
      await this.open("supernode", id);
    } else if (kind === "card") {
      const info = await this.cardInfo(id);
      if (info.rack !== null && !(view instanceof RackView && view.id === info.rack))
        await this.open("rack", info.rack);
    }
  }

  private drillTarget(): { kind: ViewKind; id: number; label: string } | null {
    const sel = this.selection;
    const view = this.view;
    if (!sel || !view) return null;
    if (view instanceof FloorView && sel.kind === "rack") {
      const i = view.instanceOf.get(sel.id);
      const sn = i === undefined ? null : view.supernodeOf(i);
      if (sn !== null) return { kind: "supernode", id: sn, label: `Open ${this.supernodeName(sn)} ›` };
      return { kind: "rack", id: sel.id, label: "Open rack ›" };
    }
    if (view instanceof FloorView && sel.kind === "supernode") {
      return { kind: "supernode", id: sel.id, label: `Open ${this.supernodeName(sel.id)} ›` };
    }
    if (view instanceof SupernodeView && sel.kind === "card") {
      const i = view.instanceOf.get(sel.id);
      if (i !== undefined) return { kind: "rack", id: view.rackOf(i), label: "Open its rack ›" };
    }
    return null;
  }

  private updateDrill(): void {
    const t = this.drillTarget();
    this.el.drill.hidden = t === null;
    if (t) this.el.drill.textContent = t.label;
  }

  private async drill(): Promise<void> {
    const t = this.drillTarget();
    if (t) await this.open(t.kind, t.id);
  }

  private goHome(): void {
    if (this.view && this.engine) this.engine.home(this.view.bounds, this.view.homeDirection);
  }

  private async onViewSelect(): Promise<void> {
    const kind = this.el.viewSelect.value as ViewKind;
    const view = this.view;
    if (kind === "cluster") return this.open("cluster", null);
    if (kind === "supernode") {
      let id = this.lastSupernode;
      if (this.selection?.kind === "rack" && view instanceof FloorView) {
        const i = view.instanceOf.get(this.selection.id);
        id = (i === undefined ? null : view.supernodeOf(i)) ?? id;
      }
      return this.open("supernode", id ?? this.floor?.supernodes.id[0] ?? null);
    }
    let rack = this.lastRack;
    if (this.selection?.kind === "card") rack = (await this.cardInfo(this.selection.id)).rack ?? rack;
    if (rack === null && view instanceof SupernodeView) rack = view.rackOf(0);
    if (rack === null && this.floor) {
      const k = this.floor.racks.cards.findIndex((c) => c > 0);
      rack = k >= 0 ? this.floor.racks.id[k] : null;
    }
    if (rack === null) {
      this.el.viewSelect.value = view?.kind ?? "cluster";
      return;
    }
    return this.open("rack", rack);
  }

  private supernodeName(id: number): string {
    const k = this.floor?.supernodes.id.indexOf(id) ?? -1;
    return k >= 0 && this.floor ? this.floor.supernodes.name[k] : `supernode ${id}`;
  }

  /** Bring the view holding an object on screen; true if the view changed. */
  private async showHolder(sel: Selection): Promise<boolean> {
    const view = this.view;
    if (view && view.locate(sel.kind, sel.id)) return false;
    if (sel.kind === "rack" || sel.kind === "supernode") {
      if (view instanceof FloorView) return false;
      await this.open("cluster", null);
      return true;
    }
    if (sel.kind === "card") {
      const info = await this.cardInfo(sel.id);
      if (info.supernode !== null) await this.open("supernode", info.supernode);
      else if (info.rack !== null) await this.open("rack", info.rack);
      else return false;
      return true;
    }
    // A link: the supernode of its card end, if it has one.
    const link = await this.api.get<{ a_card: number | null; b_card: number | null }>(`links/${sel.id}/`);
    const end = link.a_card ?? link.b_card;
    if (end === null) return false;
    const info = await this.cardInfo(end);
    if (info.supernode === null) return false;
    await this.open("supernode", info.supernode);
    return true;
  }

  // -- page chrome ---------------------------------------------------------------------
  private async loadMetrics(): Promise<void> {
    try {
      const list = await this.api.get<Array<{ key: string; label: string; unit: string }>>("telemetry/metrics/");
      if (this.metricList.length === 0)
        this.metricList = list.map((m) => ({ key: m.key, label: m.label, unit: m.unit }));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      // The hello message brings the list too.
    }
  }

  private fillMetricSelect(): void {
    const select = this.el.metricSelect;
    const cardView = this.view ? this.view.kind !== "cluster" : true;
    const all: MetricLike[] = [...this.metricList];
    if (cardView) all.push(HEALTH_METRIC);
    if (all.length === 0) all.push({ key: this.metricKey, label: this.metricKey, unit: "" });
    const signature = all.map((m) => m.key).join(",");
    if (select.dataset.signature !== signature) {
      const key = all
        .filter((m) => KEY_METRICS.includes(m.key))
        .sort((a, b) => KEY_METRICS.indexOf(a.key) - KEY_METRICS.indexOf(b.key));
      const rest = all.filter((m) => !KEY_METRICS.includes(m.key));
      const group = (label: string, items: MetricLike[]): HTMLOptGroupElement => {
        const g = document.createElement("optgroup");
        g.label = label;
        for (const m of items) {
          const o = document.createElement("option");
          o.value = m.key;
          o.textContent =
            m.key === "health" ? "Health (alerts, staleness)" : `${m.label}${m.unit ? ` (${m.unit})` : ""}`;
          g.append(o);
        }
        return g;
      };
      select.replaceChildren(group("Key metrics", key), group("All metrics", rest));
      select.dataset.signature = signature;
    }
    select.value = this.metricKey;
    select.disabled = false;
  }

  private renderCrumbs(): void {
    const view = this.view;
    const crumbs = this.el.crumbs;
    const items: HTMLElement[] = [];
    const crumb = (testid: string, label: string, go: (() => void) | null): HTMLElement => {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.testid = testid;
      b.textContent = label;
      b.className = "crumb";
      if (go) b.addEventListener("click", go);
      else b.setAttribute("aria-current", "page");
      return b;
    };
    const sep = (): HTMLElement => {
      const s = document.createElement("span");
      s.className = "crumb-sep";
      s.textContent = "›";
      return s;
    };
    const name = this.floor?.name ?? "cluster";
    items.push(crumb("crumb-cluster", name, view instanceof FloorView ? null : () => void this.open("cluster", null)));
    let sn: number | null = null;
    if (view instanceof SupernodeView) sn = view.id;
    if (view instanceof RackView) sn = view.geometry.supernode;
    if (sn !== null) {
      const snId = sn;
      items.push(
        sep(),
        crumb(
          "crumb-supernode",
          this.supernodeName(snId),
          view instanceof SupernodeView ? null : () => void this.open("supernode", snId),
        ),
      );
    }
    if (view instanceof RackView) items.push(sep(), crumb("crumb-rack", view.geometry.name, null));
    crumbs.replaceChildren(...items);
  }

  /** A message over the scene (null: hide it); optional link. `source` "connection"
   *  marks the ones the live connection coming back clears. */
  message(text: string | null, kind = "info", href?: string, linkText?: string, source = "page"): void {
    const el = this.el.message;
    if (text === null) {
      el.hidden = true;
      el.replaceChildren();
      delete el.dataset.source;
      return;
    }
    el.dataset.source = source;
    const p = document.createElement("p");
    p.textContent = text;
    el.replaceChildren(p);
    if (href) {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = linkText ?? href;
      el.append(a);
    }
    el.dataset.kind = kind;
    el.hidden = false;
  }
}
