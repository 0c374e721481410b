/**
 * Pointing at the scene: what is under the pointer (a raycast into the shown
 * view), a click to select, a double-click to open, the hover tooltip (at most
 * one raycast per animation frame), and where on screen an instance can be
 * clicked (the test hook's screenOf), and a right-click (the context menu).
 */
import { Vector3 } from "three";

import { HEALTH_NAMES, type MetricLike } from "../colour";
import { formatValue } from "../format";
import type { Marker } from "../panels/contextmenu";
import type { Engine } from "./engine";
import { FloorView } from "./floor";
import type { MarkerHit } from "./markers";
import { SupernodeView } from "./supernode";
import type { PickResult } from "./view";
import type { AnyView } from "./views";

/** What the picker asks of the page. */
export interface PickHandlers {
  /** The view shown now (null: nothing to pick). */
  view(): AnyView | null;
  /** A click (a press and release within 5 px) on an object. */
  click(hit: PickResult): void;
  /** A double-click on an object. */
  doubleClick(hit: PickResult): void;
  /** A right-click at page px (x, y): on an object, or on nothing (hit null). */
  contextMenu(hit: PickResult | null, x: number, y: number): void;
  /** A right-click on a switch or CDU marker of the floor (nearer than any rack there). */
  markerMenu?(hit: MarkerHit, x: number, y: number): void;
  /** The reading the tooltip shows for a card or rack: the metric shown, its value and unit. */
  reading(id: number): { metric: MetricLike; value: number | null; unit: string; note?: string };
}

export class Picker {
  private hoverPending = false;
  private hoverAt: { x: number; y: number } | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly scene: HTMLElement,
    private readonly tooltip: HTMLElement,
    private readonly on: PickHandlers,
  ) {
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
      if (hit) this.on.click(hit);
    });
    canvas.addEventListener("dblclick", (e) => {
      const hit = this.pickAt(e.clientX, e.clientY);
      if (hit) this.on.doubleClick(hit);
    });
    // Only over the canvas: the browser's own menu stays everywhere else.
    canvas.addEventListener("contextmenu", (e) => {
      e.preventDefault();
      const marker = this.markerAt(e.clientX, e.clientY);
      const hit = this.pickAt(e.clientX, e.clientY);
      if (marker && this.on.markerMenu && (!hit || marker.distance <= hit.distance))
        this.on.markerMenu(marker, e.clientX, e.clientY);
      else this.on.contextMenu(hit, e.clientX, e.clientY);
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
      this.tooltip.hidden = true;
    });
  }

  /** What is at CSS px (x, y) in the shown view, if anything. */
  pickAt(x: number, y: number): PickResult | null {
    const view = this.on.view();
    if (!view || !this.engine.aim(x, y)) return null;
    return view.pick(this.engine.raycaster);
  }

  /** The switch or CDU marker at CSS px (x, y) of the floor, if any. */
  markerAt(x: number, y: number): MarkerHit | null {
    const view = this.on.view();
    if (!(view instanceof FloorView) || !view.markers || !this.engine.aim(x, y)) return null;
    return view.markers.pick(this.engine.raycaster);
  }

  private hover(): void {
    const tip = this.tooltip;
    const at = this.hoverAt;
    const view = this.on.view();
    if (!at || !view) {
      tip.hidden = true;
      return;
    }
    const hit = this.pickAt(at.x, at.y);
    const marker = this.markerAt(at.x, at.y);
    if (!hit && !marker) {
      tip.hidden = true;
      this.scene.style.cursor = "";
      return;
    }
    this.scene.style.cursor = "pointer";
    tip.textContent =
      marker && (!hit || marker.distance <= hit.distance)
        ? `${marker.label} — right-click: what if it fails?`
        : this.describe(view, hit as PickResult);
    const rect = this.scene.getBoundingClientRect();
    tip.style.left = `${Math.min(at.x - rect.left + 14, rect.width - 260)}px`;
    tip.style.top = `${at.y - rect.top + 14}px`;
    tip.hidden = false;
  }

  /** The tooltip of a hit: a supernode's or link's description, else the object and its reading. */
  private describe(view: AnyView, hit: PickResult): string {
    if (hit.kind === "supernode" && view instanceof FloorView) return view.describeSupernode(hit.id);
    if (hit.kind === "link" && view instanceof SupernodeView) {
      const L = view.geometry.links;
      const wrap = L.wrap?.[hit.index] ? " · wrap-around" : "";
      return `link ${L.id[hit.index]} · ${L.kind[hit.index].replaceAll("_", " ")} · ${L.status[hit.index]}${wrap}`;
    }
    const { metric, value, unit, note } = this.on.reading(hit.id);
    const shown =
      metric.key === "health"
        ? value === null
          ? "no data"
          : (HEALTH_NAMES[value] ?? String(value))
        : formatValue(value, unit || metric.unit);
    return `${view.describe(hit.index)} — ${metric.label}: ${shown}${note ? ` · ${note}` : ""}`;
  }
}

/** Where a click hits the instance `key` of `view` (its centre, else a visible part of it). */
export function screenOf(engine: Engine, view: AnyView, key: number): { x: number; y: number } | null {
  const i = view.instanceOf.get(key);
  if (i === undefined) return null;
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

/** Where a right-click hits `marker` on the floor (its centre, if that pixel picks it), or null. */
export function markerScreenOf(engine: Engine, view: AnyView, marker: Marker): { x: number; y: number } | null {
  if (!(view instanceof FloorView) || !view.markers) return null;
  engine.camera.updateMatrixWorld();
  const centre = view.markers.centreOf(marker);
  const p = centre ? engine.project(centre) : null;
  if (!p || !engine.aim(p.x, p.y)) return null;
  const hit = view.markers.pick(engine.raycaster);
  const same =
    hit &&
    hit.marker.kind === marker.kind &&
    (hit.marker.kind === "switch"
      ? marker.kind === "switch" && hit.marker.id === marker.id
      : marker.kind === "cdu" && hit.marker.key === marker.key);
  return same ? { x: Math.round(p.x * 10) / 10, y: Math.round(p.y * 10) / 10 } : null;
}
