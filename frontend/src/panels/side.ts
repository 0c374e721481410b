/**
 * The side panel: what the user clicked in the scene (a card, rack, link or
 * supernode) — spec, live values refreshed every 2 s with a sparkline, open
 * alerts, neighbours — and the buttons that start a route from or to a card.
 * Each kind of object has its own view (sidecard.ts, siderack.ts, sidelink.ts,
 * sidesupernode.ts); this module mounts the panel and switches between them.
 *
 * Every request's failure is shown in the panel (never thrown as an uncaught
 * error); an answer that arrives after the user moved on to another object is
 * dropped (a generation counter per show()).
 */
import { button, h } from "./dom";
import { ROUTE_END_EVENT, type PanelHost, type RouteEnd, type RouteEndDetail, type Selection } from "./host";
import { showCard } from "./sidecard";
import { errorLine, type SideContext } from "./sidecommon";
import { showLink } from "./sidelink";
import { showRack } from "./siderack";
import { showSupernode } from "./sidesupernode";

export interface SidePanelOptions {
  /** Called by the card's route buttons; without it they dispatch "twin:route-end" on document. */
  onRouteEnd?: (which: RouteEnd, cardId: number) => void;
  /** Live values refresh period while a card is shown (ms, default 2000). */
  refreshMs?: number;
}

export interface SidePanel {
  show(sel: Selection): Promise<void>;
  hide(): void;
  /** What is shown now (null when hidden). */
  current(): Selection | null;
}

const KIND_LABEL: Record<Selection["kind"], string> = {
  card: "card",
  rack: "rack",
  link: "link",
  supernode: "supernode",
};

export function mountSidePanel(el: HTMLElement, host: PanelHost, opts: SidePanelOptions = {}): SidePanel {
  const refreshMs = opts.refreshMs ?? 2000;
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "side-panel");
  el.classList.add("tw-panel", "tw-side");

  const kindEl = h("span", { class: "tw-kind", "data-testid": "panel-kind" });
  const titleEl = h("h2", { class: "tw-title", "data-testid": "panel-title" });
  const body = h("div", { class: "tw-body" });
  const close = button(
    "×",
    { class: "tw-close", "data-testid": "panel-close", title: "Close", "aria-label": "Close" },
    () => panel.hide(),
  );
  el.replaceChildren(h("header", { class: "tw-head" }, kindEl, titleEl, close), body);
  el.hidden = true;

  let current: Selection | null = null;
  let generation = 0;
  const live: SideContext["live"] = { timer: null, spark: null };

  const stale = (gen: number) => gen !== generation;

  function stopLive(): void {
    if (live.timer !== null) window.clearInterval(live.timer);
    live.timer = null;
    live.spark?.destroy();
    live.spark = null;
  }

  function begin(sel: Selection, title: string): number {
    stopLive();
    generation += 1;
    current = sel;
    el.hidden = false;
    el.dataset.kind = sel.kind;
    el.dataset.id = String(sel.id);
    kindEl.textContent = KIND_LABEL[sel.kind];
    titleEl.textContent = title;
    body.replaceChildren(h("p", { class: "tw-loading" }, "Loading…"));
    el.setAttribute("aria-busy", "true");
    return generation;
  }

  function done(gen: number): void {
    if (!stale(gen)) el.removeAttribute("aria-busy");
  }

  function routeEnd(which: RouteEnd, cardId: number): void {
    if (opts.onRouteEnd) {
      opts.onRouteEnd(which, cardId);
      return;
    }
    document.dispatchEvent(new CustomEvent<RouteEndDetail>(ROUTE_END_EVENT, { detail: { which, cardId } }));
  }

  const ctx: SideContext = { host, el, title: titleEl, body, refreshMs, live, stopLive, stale, routeEnd };

  const panel: SidePanel = {
    async show(sel: Selection): Promise<void> {
      const gen = begin(sel, `${KIND_LABEL[sel.kind]} #${sel.id}`);
      try {
        if (sel.kind === "card") await showCard(ctx, sel.id, gen);
        else if (sel.kind === "rack") await showRack(ctx, sel.id, gen);
        else if (sel.kind === "link") await showLink(ctx, sel.id, gen);
        else if (sel.kind === "supernode") await showSupernode(ctx, sel.id, gen);
        else body.replaceChildren(h("p", { class: "tw-error" }, `Cannot show a ${String(sel.kind)}.`));
      } catch (error) {
        if (!stale(gen)) body.replaceChildren(errorLine(error));
      } finally {
        done(gen);
      }
    },
    hide(): void {
      stopLive();
      generation += 1;
      current = null;
      el.hidden = true;
      el.removeAttribute("aria-busy");
      delete el.dataset.kind;
      delete el.dataset.id;
      delete el.dataset.serial;
      body.replaceChildren();
      el.dispatchEvent(new CustomEvent("twin:panel-closed", { bubbles: true }));
    },
    current: () => current,
  };
  return panel;
}
