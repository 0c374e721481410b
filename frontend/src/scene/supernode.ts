/**
 * Supernode view: its cards at their torus coordinates (GET
 * /api/supernodes/<id>/geometry/) as one InstancedMesh, its scale-up links as
 * one LineSegments. A wrap-around link would cut straight through the cube, so
 * it is drawn as two short stubs leaving its ends outwards, in its own colour.
 * Supernodes without coordinates (DGX: NVLink inside each server) fall back to
 * a grid of servers (layout.ts `gridPositions`).
 */
import { Color, LineBasicMaterial, type LineSegments, Vector3, type Raycaster } from "three";

import type { SupernodeGeometry } from "../api";
import { CARD_SIZE, gridPositions, hasCoordinates, isWrap, torusPositions, wrapStubs } from "../layout";
import type { ObjectKind } from "../panels/host";
import { InstancedView, segments, type PickResult } from "./view";

const LINK_RGB: Record<string, Color> = {
  up: new Color(0x6b7d99),
  wrap: new Color(0xc084fc),
  degraded: new Color(0xf59e0b),
  down: new Color(0xef4444),
};

export class SupernodeView extends InstancedView {
  readonly kind = "supernode" as const;
  readonly id: number;
  readonly geometry: SupernodeGeometry;
  readonly torus: boolean;
  /** Per drawn segment: the link's position in geometry.links. */
  private readonly segmentLink: Int32Array;
  private readonly linkIds = new Map<number, number>();
  readonly links: LineSegments;

  constructor(geometry: SupernodeGeometry) {
    const cards = geometry.cards;
    const n = cards.id.length;
    const torus = hasCoordinates(cards);
    const centres = torus ? torusPositions(cards, geometry.dims) : gridPositions(cards);
    const sizes = new Float32Array(n * 3).fill(CARD_SIZE);
    super(cards.id, centres, sizes);
    this.id = geometry.supernode;
    this.geometry = geometry;
    this.torus = torus;
    this.homeDirection.set(-0.95, 0.8, 1.15);

    const L = geometry.links;
    const pts: number[] = [];
    const cols: number[] = [];
    const segLink: number[] = [];
    const push = (a: ArrayLike<number>, b: ArrayLike<number>, colour: Color, link: number): void => {
      pts.push(a[0], a[1], a[2], b[0], b[1], b[2]);
      cols.push(colour.r, colour.g, colour.b, colour.r, colour.g, colour.b);
      segLink.push(link);
    };
    for (let k = 0; k < L.id.length; k++) {
      this.linkIds.set(L.id[k], k);
      const a = L.a[k];
      const b = L.b[k];
      const pa = centres.subarray(a * 3, a * 3 + 3);
      const pb = centres.subarray(b * 3, b * 3 + 3);
      const wrap =
        torus &&
        (L.wrap?.[k] ??
          isWrap(
            [cards.x[a] ?? 0, cards.y[a] ?? 0, cards.z[a] ?? 0],
            [cards.x[b] ?? 0, cards.y[b] ?? 0, cards.z[b] ?? 0],
            geometry.dims,
          ));
      const status = L.status[k];
      const colour =
        status === "down"
          ? LINK_RGB.down
          : status === "degraded"
            ? LINK_RGB.degraded
            : wrap
              ? LINK_RGB.wrap
              : LINK_RGB.up;
      if (wrap) {
        const [ea, eb] = wrapStubs(pa, pb);
        push(pa, ea, colour, k);
        push(pb, eb, colour, k);
      } else {
        push(pa, pb, colour, k);
      }
    }
    this.segmentLink = Int32Array.from(segLink);
    const material = new LineBasicMaterial({ vertexColors: true, transparent: true, opacity: 0.7 });
    this.links = segments(new Float32Array(pts), material, new Float32Array(cols));
    this.root.add(this.links);

    this.mesh.computeBoundingSphere();
    const sphere = this.mesh.boundingSphere;
    if (sphere) this.bounds.copy(sphere);
    this.bounds.radius = Math.max(this.bounds.radius * 0.86, 2);
  }

  instanceKind(): ObjectKind {
    return "card";
  }

  /** Link segments drawn (wrap-arounds count two). */
  segmentCount(): number {
    return this.segmentLink.length;
  }

  pick(raycaster: Raycaster): PickResult | null {
    const card = this.pickInstance(raycaster);
    raycaster.params.Line = { threshold: 0.14 };
    const hits = raycaster.intersectObject(this.links, false);
    let link: PickResult | null = null;
    for (const hit of hits) {
      if (hit.index === undefined) continue;
      const k = this.segmentLink[Math.floor(hit.index / 2)];
      if (k === undefined) continue;
      link = { kind: "link", id: this.geometry.links.id[k], index: k, point: hit.point, distance: hit.distance };
      break;
    }
    if (card && (!link || card.distance <= link.distance + CARD_SIZE * 0.25)) {
      return { kind: "card", id: this.keys[card.index], index: card.index, point: card.point, distance: card.distance };
    }
    return link;
  }

  locate(kind: ObjectKind, id: number): { centre: Vector3; radius: number; index: number } | null {
    if (kind === "link") {
      const k = this.linkIds.get(id);
      if (k === undefined) return null;
      const a = this.centreOf(this.geometry.links.a[k]);
      const b = this.centreOf(this.geometry.links.b[k]);
      return { centre: a.clone().add(b).multiplyScalar(0.5), radius: Math.max(0.6, a.distanceTo(b) / 2), index: -1 };
    }
    return super.locate(kind, id);
  }

  describe(i: number): string {
    const c = this.geometry.cards;
    const where = this.torus ? ` · (${c.x[i]}, ${c.y[i]}, ${c.z[i]})` : ` · slot ${c.slot[i]}`;
    return `${c.serial[i]}${where}${c.status[i] !== "ok" ? ` · ${c.status[i]}` : ""}`;
  }

  /** Whether cards at instances `i` and `j` are torus neighbours across the wrap-around. */
  wraps(i: number, j: number): boolean {
    if (!this.torus) return false;
    const c = this.geometry.cards;
    return isWrap([c.x[i] ?? 0, c.y[i] ?? 0, c.z[i] ?? 0], [c.x[j] ?? 0, c.y[j] ?? 0, c.z[j] ?? 0], this.geometry.dims);
  }

  /** Rack of the card at instance `i`. */
  rackOf(i: number): number {
    return this.geometry.cards.rack[i];
  }
}
