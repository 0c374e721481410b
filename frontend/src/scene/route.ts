/**
 * The route overlay: which view shows a route whole, and where each node of
 * its path is drawn in the current view — card nodes at their card (or, on
 * the floor, their rack's top); the nodes between cards (NICs, switches)
 * lifted above the line between the cards around them, higher for higher tiers.
 */
import { Vector3 } from "three";

import type { Route } from "../api";
import { RACK, wrapStubs } from "../layout";
import { FloorView } from "./floor";
import type { CardInfo } from "./geometry";
import type { Target } from "./navigation";
import { RackView } from "./rack";
import { SupernodeView } from "./supernode";
import type { InstancedView, RoutePoint } from "./view";
import type { AnyView } from "./views";

/** How many steps above the cards a node of each kind is drawn (unknown kinds: 3). */
export const LEVEL: Readonly<Record<string, number>> = {
  pcie_switch: 1,
  pcie: 1,
  nic: 2,
  smart_nic: 2,
  leaf: 3,
  switch: 3,
  spine: 4,
  core: 5,
};

/**
 * The view to open so a route's cards are all on screen: their supernode when
 * they share one, else the floor; null when the current view is that already.
 */
export function routeView(view: AnyView | null, cards: ReadonlyArray<CardInfo>): Target | null {
  const supernodes = new Set(cards.map((c) => c.supernode));
  if (supernodes.size === 1 && cards[0].supernode !== null) {
    const sn = cards[0].supernode;
    return view instanceof SupernodeView && view.id === sn ? null : { kind: "supernode", id: sn };
  }
  return view instanceof FloorView ? null : { kind: "cluster", id: null };
}

/** The points to draw `route` with in `view`; `cardOf` says where a card lives (the floor needs its rack). */
export function routePoints(view: AnyView, route: Route, cardOf: (id: number) => CardInfo | undefined): RoutePoint[] {
  const cardPos: Array<Vector3 | null> = [];
  const cardInst: Array<number | null> = [];
  for (const node of route.path) {
    if (node.card === null) {
      cardPos.push(null);
      cardInst.push(null);
      continue;
    }
    if (view instanceof FloorView) {
      const rack = cardOf(node.card)?.rack;
      const i = rack === undefined || rack === null ? undefined : view.instanceOf.get(rack);
      cardPos.push(i === undefined ? null : view.centreOf(i).add(new Vector3(0, RACK.h / 2 + 0.15, 0)));
      cardInst.push(i ?? null);
    } else {
      const i = view.instanceOf.get(node.card);
      cardPos.push(i === undefined ? null : view.centreOf(i));
      cardInst.push(i ?? null);
    }
  }
  const top = topOf(view);
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
  return points;
}

/** The height of the tallest instance of a view. */
function topOf(view: InstancedView): number {
  let top = 0;
  for (let i = 0; i < view.keys.length; i++) top = Math.max(top, view.centres[i * 3 + 1] + view.sizes[i * 3 + 1] / 2);
  return top;
}
