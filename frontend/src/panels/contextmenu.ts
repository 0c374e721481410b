/**
 * The 3D view's right-click menu: "What if this fails?" on a rack, a card, or a switch or
 * CDU marker of the floor opens
 * the scenario form as a `whatif` run with that object's failure at 0 s, so one
 * click on Run asks the twin what the failure would cost.
 *
 * `failureEvent` is the pure part (object → the what-if event the engine takes,
 * simulation/whatif/events.py); `mountContextMenu` is the small floating menu, closed
 * by Escape, a click elsewhere or choosing an item.
 */
import type { ObjectKind } from "./host";
import { h } from "./dom";

export const WHATIF_ITEM = "What if this fails?";

/** One what-if event (simulation/whatif/events.py's fields). */
export interface WhatIfEvent {
  at_s: number;
  kind: string;
  /** An inventory id, or a facility element's key (a CDU). */
  target: number | string;
}

/** The failure of a picked object at the fork, or null when the what-if engine cannot fail it. */
export function failureEvent(kind: ObjectKind, id: number): WhatIfEvent | null {
  // A supernode is a group of racks and a link is not modelled (a switch down takes
  // its servers out; links and scale-up degradation are not): no single event for them.
  const what: Partial<Record<ObjectKind, string>> = { rack: "fail_rack", card: "fail_card" };
  const event = what[kind];
  return event ? { at_s: 0, kind: event, target: id } : null;
}

export interface MenuItem {
  label: string;
  run(): void;
}

export interface ContextMenu {
  /** Show `items` at page px (x, y) inside the menu's parent; replaces a menu already shown. */
  show(x: number, y: number, items: MenuItem[]): void;
  close(): void;
  readonly open: boolean;
}

/** The menu, appended to `parent` (positioned relative to it). */
export function mountContextMenu(parent: HTMLElement): ContextMenu {
  const el = h("ul", { class: "tw-context-menu", role: "menu", "data-testid": "context-menu" });
  el.hidden = true;
  parent.append(el);
  const onKey = (e: KeyboardEvent) => {
    if (e.key === "Escape") menu.close();
  };
  const onDown = (e: PointerEvent) => {
    if (!el.contains(e.target as Node | null)) menu.close();
  };
  const menu: ContextMenu = {
    get open() {
      return !el.hidden;
    },
    show(x, y, items) {
      const rect = parent.getBoundingClientRect();
      el.replaceChildren(
        ...items.map((item) => {
          const b = h("button", { type: "button", role: "menuitem", "data-testid": "context-menu-item" }, item.label);
          b.addEventListener("click", () => {
            menu.close();
            item.run();
          });
          return h("li", {}, b);
        }),
      );
      el.style.left = `${x - rect.left}px`;
      el.style.top = `${y - rect.top}px`;
      el.hidden = false;
      document.addEventListener("keydown", onKey);
      document.addEventListener("pointerdown", onDown, true);
      el.querySelector("button")?.focus();
    },
    close() {
      el.hidden = true;
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("pointerdown", onDown, true);
    },
  };
  return menu;
}

/** A floor marker the what-if engine can fail: a fabric switch (its id) or a CDU (its key). */
export type Marker = { kind: "switch"; id: number } | { kind: "cdu"; key: string };

/** The failure of a marker at the fork: `fail_switch` (the servers it carries go down)
 *  or `cdu_trip` (the CDU stops; its racks lose their liquid cooling). */
export function markerFailure(marker: Marker): WhatIfEvent {
  return marker.kind === "switch"
    ? { at_s: 0, kind: "fail_switch", target: marker.id }
    : { at_s: 0, kind: "cdu_trip", target: marker.key };
}
