/**
 * The dashboard's 3D core: which view is shown, what it is coloured by, the
 * live stream feeding it, and the PanelHost the side panels talk to.
 *
 * The controller owns the state (cluster, view, metric, selection, route) and
 * wires the parts that each do one thing: the geometry cache (geometry.ts),
 * moving between views (navigation.ts), the metric picker (metrics.ts),
 * colours and legend (paint.ts), the route overlay (route.ts) and pointing at
 * things (picking.ts).
 */
import type { Api, ClusterAllocations, Route } from "../api";
import { ViewFrames, type FrameMessage, type Subscription, type ViewKind } from "../frames";
import type { TwinHook } from "../hook";
import type { ConnectionState, HelloMessage, LiveClient } from "../live";
import type { AlertsPanel, JobsPanel, RemediationsPanel, RoutePanel, ScenariosPanel, SidePanel } from "../panels";
import {
  failureEvent,
  markerFailure,
  mountContextMenu,
  WHATIF_ITEM,
  type ContextMenu,
  type Marker,
} from "../panels/contextmenu";
import type { MetricInfo, ObjectKind, PanelHost, Selection } from "../panels/host";
import { isJobColouring } from "../panels/jobs";
import { FLOOR_ONLY_METRICS, type CduList, type SwitchList } from "../plant";
import type { StatusBar } from "../statusbar";
import { Engine, WebGLUnavailable } from "./engine";
import { FloorView } from "./floor";
import { GeometryCache } from "./geometry";
import { MetricMenu } from "./metrics";
import { Navigator } from "./navigation";
import { Painter } from "./paint";
import type { MarkerHit } from "./markers";
import { markerScreenOf, Picker, screenOf } from "./picking";
import { RackView } from "./rack";
import { routePoints, routeView } from "./route";
import type { AnyView } from "./views";

export interface Panels {
  side: Pick<SidePanel, "show" | "hide"> | null;
  alerts: Pick<AlertsPanel, "reset" | "push"> | null;
  route: Pick<RoutePanel, "setEnd" | "reset"> | null;
  scenarios: (Pick<ScenariosPanel, "reset"> & Partial<Pick<ScenariosPanel, "prefill">>) | null;
  jobs?: Pick<JobsPanel, "reset"> | null;
  remediations?: Pick<RemediationsPanel, "reset"> | null;
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

export class Controller implements PanelHost {
  readonly engine: Engine | null;
  panels: Panels = { side: null, alerts: null, route: null, scenarios: null };
  live: LiveClient | null = null;
  /** Called when the view or metric changes (the page keeps them in the URL). */
  onChange: (view: { kind: ViewKind; id: number | null; metric: string }) => void = () => {};

  private view: AnyView | null = null;
  private frames: ViewFrames | null = null;
  private metricKey = "power_w";
  /** The cluster's allocations and the highlighted job (the jobs panel's), for "Job" / "Tenant". */
  private allocations: ClusterAllocations | null = null;
  private jobHighlight: number | null = null;
  /** A scheduling run's playback frame (rack id → allocated share) and its title; it
   *  overrides the metric's colours on the floor while it is shown. */
  private playback: { shares: ReadonlyMap<number, number>; label: string } | null = null;
  /** A what-if's peak rack kW difference on the floor (rack id → kW) and its scale. */
  private difference: { values: ReadonlyMap<number, number>; label: string; span: number } | null = null;
  private selection: Selection | null = null;
  private routeShown: Route | null = null;
  private openToken = 0;
  private readonly cache: GeometryCache;
  private readonly nav: Navigator;
  private readonly menu: MetricMenu;
  private readonly painter: Painter;
  private readonly picker: Picker | null = null;
  private readonly contextMenu: ContextMenu;
  /** The floor's switches and CDUs of the shown cluster (loaded once per cluster). */
  private markerData: { cluster: number; data: Promise<[SwitchList | null, CduList | null]> } | null = null;

  constructor(
    readonly api: Api,
    private readonly el: ControllerElements,
    private readonly hook: TwinHook,
    private readonly status: StatusBar,
  ) {
    this.cache = new GeometryCache(api);
    this.nav = new Navigator(api, this.cache);
    this.menu = new MetricMenu(api, el.metricSelect);
    this.painter = new Painter(el.legend);
    this.contextMenu = mountContextMenu(el.scene);
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
    if (engine) {
      this.picker = new Picker(engine, el.scene, el.tooltip, {
        view: () => this.view,
        click: (hit) => void this.select({ kind: hit.kind, id: hit.id }, { fly: false }),
        doubleClick: (hit) => void this.openTarget(this.nav.doubleClickTarget(this.view, hit.kind, hit.id)),
        contextMenu: (hit, x, y) => this.showContextMenu(hit, x, y),
        markerMenu: (hit, x, y) => this.showMarkerMenu(hit, x, y),
        reading: (id) => ({
          metric: this.menu.info(this.metricKey),
          value: this.valueOf(id),
          unit: this.frames?.unit ?? "",
          note: this.frames?.bindingOf(id) ? "a power limit binds here" : undefined,
        }),
      });
    }
    el.metricSelect.addEventListener("change", () => this.setMetric(el.metricSelect.value));
    el.viewSelect.addEventListener("change", () => void this.onViewSelect());
    el.drill.addEventListener("click", () => void this.drill());
    el.home.addEventListener("click", () => this.goHome());
  }

  /** A right-click: "What if this fails?" on an object the what-if engine can fail, else no menu. */
  private showContextMenu(hit: { kind: ObjectKind; id: number } | null, x: number, y: number): void {
    const event = hit ? failureEvent(hit.kind, hit.id) : null;
    const scenarios = this.panels.scenarios;
    if (!event || !scenarios?.prefill) {
      this.contextMenu.close();
      return;
    }
    this.el.tooltip.hidden = true;
    this.contextMenu.show(x, y, [
      { label: WHATIF_ITEM, run: () => scenarios.prefill?.("whatif", { events: JSON.stringify([event]) }) },
    ]);
  }

  /** A right-click on a switch or CDU marker: "What if this fails?" → its failure at 0 s. */
  private showMarkerMenu(hit: MarkerHit, x: number, y: number): void {
    const scenarios = this.panels.scenarios;
    if (!scenarios?.prefill) {
      this.contextMenu.close();
      return;
    }
    this.el.tooltip.hidden = true;
    const event = markerFailure(hit.marker);
    this.contextMenu.show(x, y, [
      { label: WHATIF_ITEM, run: () => scenarios.prefill?.("whatif", { events: JSON.stringify([event]) }) },
    ]);
  }

  /** The floor's switches (GET clusters/<id>/switches/) and CDUs (the cluster's site's
   *  cdus/), each null when it cannot be read (no facility, no permission). */
  private loadMarkerData(cluster: number): Promise<[SwitchList | null, CduList | null]> {
    if (this.markerData?.cluster !== cluster) {
      const switches = this.api.get<SwitchList>(`clusters/${cluster}/switches/`).catch(() => null);
      const cdus = this.api
        .get<{ results: { id: number }[] }>(`facility/sites/?cluster=${cluster}`)
        .then((sites) =>
          sites.results.length ? this.api.get<CduList>(`facility/sites/${sites.results[0].id}/cdus/`) : null,
        )
        .catch(() => null);
      this.markerData = { cluster, data: Promise.all([switches, cdus]) };
    }
    return this.markerData.data;
  }

  /** Draw the markers on `view` once their data is in (if it is still shown). */
  private async drawMarkers(view: FloorView): Promise<void> {
    const [switches, cdus] = await this.loadMarkerData(this.cache.cluster);
    if (this.view !== view) return;
    view.setMarkers(switches, cdus);
    this.hook.markersReady = true;
    this.engine?.invalidate();
  }

  /** Start loading a cluster's floor before the page is up (the URL names it). */
  static prefetchFloor(api: Api, clusterId: number): void {
    GeometryCache.prefetchFloor(api, clusterId);
  }

  // -- PanelHost ---------------------------------------------------------------
  clusterId(): number {
    return this.cache.cluster;
  }

  metrics(): MetricInfo[] {
    return this.menu.list;
  }

  metric(): string {
    return this.metricKey;
  }

  async select(sel: Selection, opts: { fly?: boolean } = {}): Promise<void> {
    const fly = opts.fly ?? true;
    this.selection = sel;
    let switched = false;
    try {
      const holder = await this.nav.holderOf(this.view, sel);
      if (holder) {
        await this.open(holder.kind, holder.id);
        switched = true;
      }
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
    this.nav.selected(sel);
    await this.panels.side?.show(sel);
  }

  /** The side panel was closed: drop the outline and the drill button. */
  clearSelection(): void {
    this.selection = null;
    this.view?.mark(null, null);
    this.updateDrill();
    this.engine?.invalidate();
  }

  async showRoute(route: Route | null): Promise<void> {
    this.routeShown = route;
    this.hook.route = route
      ? { cards: [...route.cards], links: route.links.filter((l): l is number => l !== null) }
      : null;
    if (!route || !route.reachable || route.cards.length === 0) {
      this.view?.showRoute(null);
      this.engine?.invalidate();
      return;
    }
    const infos = await Promise.all(route.cards.map((id) => this.cache.card(id)));
    if (this.routeShown !== route) return;
    const target = routeView(this.view, infos);
    if (target) await this.open(target.kind, target.id);
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
    // The floor is needed by every view (names, the way back); ask for it now, in
    // parallel with the metric list, which only labels things and can come later.
    this.cache.reset(clusterId).then(
      () => {
        if (this.cache.cluster === clusterId) this.renderCrumbs();
      },
      () => undefined,
    );
    this.selection = null;
    this.routeShown = null;
    this.hook.route = null;
    this.nav.reset();
    this.hook.ready = false;
    this.panels.side?.hide();
    this.panels.route?.reset();
    this.status.reset();
    if (want.metric) this.metricKey = want.metric;
    if (this.menu.list.length === 0) {
      void this.menu.load().then(() => {
        this.fillMetricSelect();
        this.painter.renderLegend();
      });
    }
    this.fillMetricSelect();
    live.start();
    this.allocations = null;
    this.jobHighlight = null;
    const panels = Promise.allSettled([
      this.panels.alerts?.reset(),
      this.panels.scenarios?.reset(),
      this.panels.jobs?.reset(),
      this.panels.remediations?.reset(),
    ]);
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
    this.menu.fromHello(hello);
    this.fillMetricSelect();
  }

  /** Live: a snapshot or frame. */
  frame(msg: FrameMessage): void {
    const view = this.view;
    const frames = this.frames;
    if (!view || !frames) return;
    const t0 = performance.now();
    if (!frames.apply(msg)) return;
    if (msg.type === "snapshot" && msg.view === "cluster") this.painter.snapshot(frames);
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
      const view = await this.nav.build(kind, id, () => token === this.openToken);
      if (!view) return;
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
    if ((this.metricKey === "health" || isJobColouring(this.metricKey)) && view.kind === "cluster")
      this.metricKey = "power_w";
    // The plant's own metrics are per rack: a card view shows power instead.
    if (FLOOR_ONLY_METRICS.includes(this.metricKey) && view.kind !== "cluster") this.metricKey = "power_w";
    this.hook.markersReady = false;
    if (view instanceof FloorView) void this.drawMarkers(view);
    this.painter.install(view);
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
    const key = this.metricKey;
    const metric = key === "health" || isJobColouring(key) ? "gpu_util" : key;
    const sub: Subscription = { view: view.kind, id: view.id, metric };
    this.frames.follow(sub);
    // A rack without cards has no live values (the server would refuse the view).
    if (view.keys.length === 0) this.live?.unsubscribe();
    else this.live?.subscribe(sub);
  }

  setMetric(key: string): void {
    if (key === this.metricKey) return;
    const cardOnly = key === "health" || isJobColouring(key);
    const floorOnly = FLOOR_ONLY_METRICS.includes(key);
    this.metricKey =
      (cardOnly && this.view?.kind === "cluster") || (floorOnly && this.view && this.view.kind !== "cluster")
        ? "power_w"
        : key;
    this.el.metricSelect.value = this.metricKey;
    this.el.tooltip.hidden = true;
    this.subscribe();
    this.paint(true);
    this.engine?.invalidate();
    this.hook.view = { ...this.hook.view, metric: this.metricKey };
    this.onChange(this.hook.view);
  }

  /** Recolour the view from the live values. */
  private paint(rescale: boolean): void {
    if (!this.view || !this.frames) return;
    if (this.difference && this.view.kind === "cluster") {
      const d = this.difference;
      this.painter.paintDifference(this.view, d.values, d.label, d.span);
      return;
    }
    if (this.playback && this.view.kind === "cluster") {
      this.painter.paintShares(this.view, this.playback.shares, this.playback.label);
      return;
    }
    if (isJobColouring(this.metricKey)) {
      this.painter.paintJobs(this.view, this.menu.info(this.metricKey), this.allocations, this.jobHighlight);
      return;
    }
    this.painter.paint(this.view, this.frames, this.menu.info(this.metricKey), rescale);
  }

  /** The jobs panel's allocations and highlighted job: repaint when cards are coloured by them. */
  showAllocations(alloc: ClusterAllocations | null, highlight: number | null): void {
    this.allocations = alloc;
    this.jobHighlight = highlight;
    if (isJobColouring(this.metricKey)) {
      this.paint(true);
      this.engine?.invalidate();
    }
  }

  /** A scheduling run's playback frame on the floor (null: back to the live metric). */
  showPlayback(shares: ReadonlyMap<number, number> | null, label: string): void {
    const was = this.playback !== null;
    this.playback = shares ? { shares, label } : null;
    if (this.view?.kind !== "cluster" || (!was && !shares)) return;
    this.paint(true);
    this.engine?.invalidate();
  }

  /** A what-if's rack differences on the floor (null: back to the live metric). */
  showDifference(values: ReadonlyMap<number, number> | null, label: string, span: number): void {
    const was = this.difference !== null;
    this.difference = values ? { values, label, span } : null;
    if (this.view?.kind !== "cluster" || (!was && !values)) return;
    this.paint(true);
    this.engine?.invalidate();
  }

  /** Draw the shown route in the current view. */
  private drawRoute(): void {
    const view = this.view;
    const route = this.routeShown;
    if (!view || !route) return;
    view.showRoute(routePoints(view, route, (id) => this.cache.knownCard(id)));
    this.engine?.invalidate();
  }

  // -- test hook ----------------------------------------------------------------------
  keys(): number[] {
    return this.view ? [...this.view.keys] : [];
  }

  colourOf(key: number): string | null {
    return this.painter.colourOf(this.view, key);
  }

  valueOf(key: number): number | null {
    return this.frames ? this.frames.valueOf(key, this.metricKey === "health") : null;
  }

  /** Where a click hits the instance `key` (its centre, else a visible part of it). */
  screenOf(key: number): { x: number; y: number } | null {
    return this.view && this.engine ? screenOf(this.engine, this.view, key) : null;
  }

  highlighted(): number {
    return this.view ? this.view.routeDrawn() : 0;
  }

  /** The floor's switch and CDU markers drawn (the test hook's markers). */
  markers(): Marker[] {
    return this.view instanceof FloorView && this.view.markers ? this.view.markers.list() : [];
  }

  /** Where a right-click hits a marker (the test hook's markerScreenOf). */
  markerScreenOf(marker: Marker): { x: number; y: number } | null {
    return this.view && this.engine ? markerScreenOf(this.engine, this.view, marker) : null;
  }

  /** The rack view's power bar (the test hook's rackDraw). */
  rackDraw(): number | null {
    return this.view instanceof RackView ? this.view.drawW : null;
  }

  /** What a click at CSS px (x, y) would select (the test hook's pickAt). */
  pickObjectAt(x: number, y: number): { kind: ObjectKind; id: number } | null {
    const hit = this.picker?.pickAt(x, y) ?? null;
    return hit ? { kind: hit.kind, id: hit.id } : null;
  }

  // -- page chrome ---------------------------------------------------------------------
  /** Open where a navigation answer points (nothing when it points nowhere). */
  private async openTarget(target: Promise<{ kind: ViewKind; id: number | null } | null>): Promise<void> {
    const t = await target;
    if (t) await this.open(t.kind, t.id);
  }

  private updateDrill(): void {
    const t = this.nav.drillTarget(this.view, this.selection);
    this.el.drill.hidden = t === null;
    if (t) this.el.drill.textContent = t.label;
  }

  private async drill(): Promise<void> {
    const t = this.nav.drillTarget(this.view, this.selection);
    if (t) await this.open(t.kind, t.id);
  }

  private goHome(): void {
    if (this.view && this.engine) this.engine.home(this.view.bounds, this.view.homeDirection);
  }

  private async onViewSelect(): Promise<void> {
    const view = this.view;
    const target = await this.nav.pickerTarget(this.el.viewSelect.value as ViewKind, view, this.selection);
    if (target) return this.open(target.kind, target.id);
    this.el.viewSelect.value = view?.kind ?? "cluster";
  }

  private fillMetricSelect(): void {
    this.menu.fill(this.metricKey, this.view ? this.view.kind !== "cluster" : true);
  }

  private renderCrumbs(): void {
    this.nav.renderCrumbs(this.el.crumbs, this.view, (kind, id) => void this.open(kind, id));
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
