/**
 * Moving between the views: building the view asked for (fetching its
 * geometry through the cache), remembering the last supernode and rack seen,
 * and answering "where does this go" for the page's controls — the view that
 * holds a selected object, a double-click, the drill button, the view picker
 * and the breadcrumbs. The controller opens what these answer.
 */
import type { Api } from "../api";
import type { ViewKind } from "../frames";
import type { ObjectKind, Selection } from "../panels/host";
import { FloorView } from "./floor";
import type { GeometryCache } from "./geometry";
import { RackView } from "./rack";
import { SupernodeView } from "./supernode";
import type { AnyView } from "./views";

/** A view to open (id null: the default one of that kind). */
export interface Target {
  kind: ViewKind;
  id: number | null;
}

/** What the drill button opens, and its label. */
export interface DrillTarget {
  kind: ViewKind;
  id: number;
  label: string;
}

export class Navigator {
  /** The supernode and rack last opened or selected: where "Supernode"/"Rack" go back to. */
  lastSupernode: number | null = null;
  lastRack: number | null = null;

  constructor(
    private readonly api: Api,
    private readonly cache: GeometryCache,
  ) {}

  /** A new cluster: nothing seen yet. */
  reset(): void {
    this.lastSupernode = null;
    this.lastRack = null;
  }

  /** A selected rack or supernode is where the view picker goes next. */
  selected(sel: Selection): void {
    if (sel.kind === "rack") this.lastRack = sel.id;
    if (sel.kind === "supernode") this.lastSupernode = sel.id;
  }

  /**
   * Build the view of `kind` (id null: the last one seen, else the first).
   * Returns null when `current()` says another open() started meanwhile.
   */
  async build(kind: ViewKind, id: number | null, current: () => boolean): Promise<AnyView | null> {
    const cache = this.cache;
    if (kind === "cluster") {
      const floor = await cache.loadFloor();
      if (!current()) return null;
      performance.mark("twin:floor-loaded");
      return new FloorView(floor);
    }
    if (kind === "supernode") {
      const sid = id ?? this.lastSupernode ?? cache.floor?.supernodes.id[0] ?? null;
      if (sid === null) throw new Error("no supernode to open");
      const g = await cache.supernode(sid);
      if (!current()) return null;
      if (g.cluster !== cache.cluster) throw new Error(`supernode ${sid} is not in this cluster`);
      const view = new SupernodeView(g);
      this.lastSupernode = sid;
      cache.noteSupernodeCards(g);
      return view;
    }
    const rid = id ?? this.lastRack ?? null;
    if (rid === null) throw new Error("no rack to open");
    const g = await cache.rack(rid);
    if (!current()) return null;
    if (g.cluster !== cache.cluster) throw new Error(`rack ${rid} is not in this cluster`);
    const view = new RackView(g);
    this.lastRack = rid;
    if (g.supernode !== null) this.lastSupernode = g.supernode;
    cache.noteRackCards(g);
    return view;
  }

  /** The view to open to bring a selected object on screen; null if it is shown already (or nowhere). */
  async holderOf(view: AnyView | null, sel: Selection): Promise<Target | null> {
    if (view && view.locate(sel.kind, sel.id)) return null;
    if (sel.kind === "rack" || sel.kind === "supernode") {
      return view instanceof FloorView ? null : { kind: "cluster", id: null };
    }
    if (sel.kind === "card") {
      const info = await this.cache.card(sel.id);
      if (info.supernode !== null) return { kind: "supernode", id: info.supernode };
      if (info.rack !== null) return { kind: "rack", id: info.rack };
      return null;
    }
    // A link: the supernode of its card end, if it has one.
    const link = await this.api.get<{ a_card: number | null; b_card: number | null }>(`links/${sel.id}/`);
    const end = link.a_card ?? link.b_card;
    if (end === null) return null;
    const info = await this.cache.card(end);
    return info.supernode === null ? null : { kind: "supernode", id: info.supernode };
  }

  /** Double-click: a rack or supernode opens its supernode (a network rack: the rack); a card its rack. */
  async doubleClickTarget(view: AnyView | null, kind: ObjectKind, id: number): Promise<Target | null> {
    if (kind === "rack" && view instanceof FloorView) {
      const i = view.instanceOf.get(id);
      const sn = i === undefined ? null : view.supernodeOf(i);
      return sn !== null ? { kind: "supernode", id: sn } : { kind: "rack", id };
    }
    if (kind === "supernode") return { kind: "supernode", id };
    if (kind === "card") {
      const info = await this.cache.card(id);
      if (info.rack !== null && !(view instanceof RackView && view.id === info.rack)) {
        return { kind: "rack", id: info.rack };
      }
    }
    return null;
  }

  /** The drill button: one level down from the selection, if there is one. */
  drillTarget(view: AnyView | null, sel: Selection | null): DrillTarget | null {
    if (!sel || !view) return null;
    if (view instanceof FloorView && sel.kind === "rack") {
      const i = view.instanceOf.get(sel.id);
      const sn = i === undefined ? null : view.supernodeOf(i);
      if (sn !== null) return { kind: "supernode", id: sn, label: `Open ${this.cache.supernodeName(sn)} ›` };
      return { kind: "rack", id: sel.id, label: "Open rack ›" };
    }
    if (view instanceof FloorView && sel.kind === "supernode") {
      return { kind: "supernode", id: sel.id, label: `Open ${this.cache.supernodeName(sel.id)} ›` };
    }
    if (view instanceof SupernodeView && sel.kind === "card") {
      const i = view.instanceOf.get(sel.id);
      if (i !== undefined) return { kind: "rack", id: view.rackOf(i), label: "Open its rack ›" };
    }
    return null;
  }

  /**
   * The view picker chose `kind`: which one to open (the selection's, else the
   * last seen, else the first); null when there is none (no rack with cards).
   */
  async pickerTarget(kind: ViewKind, view: AnyView | null, sel: Selection | null): Promise<Target | null> {
    if (kind === "cluster") return { kind, id: null };
    const floor = this.cache.floor;
    if (kind === "supernode") {
      let id = this.lastSupernode;
      if (sel?.kind === "rack" && view instanceof FloorView) {
        const i = view.instanceOf.get(sel.id);
        id = (i === undefined ? null : view.supernodeOf(i)) ?? id;
      }
      return { kind, id: id ?? floor?.supernodes.id[0] ?? null };
    }
    let rack = this.lastRack;
    if (sel?.kind === "card") rack = (await this.cache.card(sel.id)).rack ?? rack;
    if (rack === null && view instanceof SupernodeView) rack = view.rackOf(0);
    if (rack === null && floor) {
      const k = floor.racks.cards.findIndex((c) => c > 0);
      rack = k >= 0 ? floor.racks.id[k] : null;
    }
    return rack === null ? null : { kind: "rack", id: rack };
  }

  /** The breadcrumbs: cluster › supernode › rack, each but the current one a button that opens it. */
  renderCrumbs(crumbs: HTMLElement, view: AnyView | null, open: (kind: ViewKind, id: number | null) => void): void {
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
    const name = this.cache.floor?.name ?? "cluster";
    items.push(crumb("crumb-cluster", name, view instanceof FloorView ? null : () => open("cluster", null)));
    let sn: number | null = null;
    if (view instanceof SupernodeView) sn = view.id;
    if (view instanceof RackView) sn = view.geometry.supernode;
    if (sn !== null) {
      const snId = sn;
      items.push(
        sep(),
        crumb(
          "crumb-supernode",
          this.cache.supernodeName(snId),
          view instanceof SupernodeView ? null : () => open("supernode", snId),
        ),
      );
    }
    if (view instanceof RackView) items.push(sep(), crumb("crumb-rack", view.geometry.name, null));
    crumbs.replaceChildren(...items);
  }
}
