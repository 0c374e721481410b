/**
 * Cluster overview: the floor plan from GET /api/clusters/<id>/floor/.
 *
 * Every rack is one instance of a single `InstancedMesh` (26k racks of the
 * million cluster are one draw call); supernodes are ground tiles (one more
 * InstancedMesh) with a name when there are few enough to read; the network
 * tiers (floor.tiers, from the cards upwards) are translucent frames stacked
 * above the floor. Nothing per card is fetched here: the live cluster view
 * sends one value per rack.
 */
import {
  Box3,
  BoxGeometry,
  Color,
  DoubleSide,
  EdgesGeometry,
  InstancedMesh,
  LineBasicMaterial,
  LineSegments,
  Matrix4,
  Mesh,
  MeshBasicMaterial,
  MeshLambertMaterial,
  PlaneGeometry,
  Vector3,
  type Raycaster,
} from "three";

import type { Floor } from "../api";
import { CODE_NETWORK } from "../colour";
import type { ObjectKind } from "../panels/host";
import { GROUP_GAP, RACK, floorLayout, type FloorLayout } from "../layout";
import { cduPlaces, switchPlaces, type CduList, type SwitchList } from "../plant";
import { makeLabel } from "./labels";
import { FloorMarkers } from "./markers";
import { InstancedView, segments, type PickResult } from "./view";

/** Above this many supernodes the floor shows no name sprites (unreadable anyway). */
export const MAX_GROUP_LABELS = 64;
/** A tier with more holding racks than this gets no drop lines (it is "in every rack"). */
const MAX_TIER_LINES = 64;

const TIER_COLOURS: Record<string, number> = {
  pcie_switch: 0x64748b,
  smart_nic: 0x0ea5e9,
  nic: 0x0ea5e9,
  leaf: 0x22c55e,
  spine: 0xeab308,
  core: 0xf97316,
  nvswitch: 0xa855f7,
};

export class FloorView extends InstancedView {
  readonly kind = "cluster" as const;
  readonly id = null;
  readonly layout: FloorLayout;
  readonly floor: Floor;
  /** Per rack: its supernode's name (for tooltips). */
  private readonly groupName: string[];
  /** The supernode ground tiles (one instance per group): a click on one selects the supernode. */
  private tiles: InstancedMesh | null = null;
  private readonly snById = new Map<number, number>();
  readonly tierHeights: number[] = [];
  /** The switch and CDU markers, once loaded (`setMarkers`). */
  markers: FloorMarkers | null = null;

  constructor(floor: Floor) {
    const layout = floorLayout(floor.racks, floor.supernodes);
    const n = floor.racks.id.length;
    const centres = new Float32Array(n * 3);
    const sizes = new Float32Array(n * 3);
    for (let i = 0; i < n; i++) {
      centres[i * 3] = layout.x[i];
      centres[i * 3 + 1] = RACK.h / 2;
      centres[i * 3 + 2] = layout.z[i];
      sizes[i * 3] = RACK.w;
      sizes[i * 3 + 1] = RACK.h;
      sizes[i * 3 + 2] = RACK.d;
    }
    super(floor.racks.id, centres, sizes);
    this.floor = floor;
    this.layout = layout;
    this.groupName = Array.from({ length: n }, (_, i) => layout.groups[layout.group[i]]?.name ?? "");
    floor.supernodes.id.forEach((id, k) => this.snById.set(id, k));
    // Racks without cards (network racks): no card metric applies to them.
    this.fixed = new Int16Array(n).fill(-1);
    for (let i = 0; i < n; i++) if (!floor.racks.cards[i]) this.fixed[i] = CODE_NETWORK;
    this.buildGround();
    this.buildTiers();
    // Frame the floor and the tiers above it (the sphere around that box is
    // generous for a flat floor: shrink it so the floor fills the view).
    const top = this.tierHeights.length ? this.tierHeights[this.tierHeights.length - 1] : RACK.h;
    new Box3(new Vector3(layout.x0, 0, layout.z0), new Vector3(layout.x1, top, layout.z1)).getBoundingSphere(
      this.bounds,
    );
    this.bounds.radius = Math.max(4, this.bounds.radius * 0.85);
    this.homeDirection.set(-0.18, 1.05, 1);
  }

  instanceKind(): ObjectKind {
    return "rack";
  }

  private buildGround(): void {
    const L = this.layout;
    const groups = L.groups;
    // One slab under the whole floor, then one tile per supernode group.
    const margin = 1.5;
    const base = new Mesh(
      new PlaneGeometry(L.x1 - L.x0 + margin * 2, L.z1 - L.z0 + margin * 2),
      new MeshBasicMaterial({ color: 0x131820 }),
    );
    base.rotation.x = -Math.PI / 2;
    base.position.y = -0.02;
    this.root.add(base);

    const tiles = new InstancedMesh(
      new BoxGeometry(1, 1, 1),
      new MeshLambertMaterial({ color: 0xffffff }),
      groups.length,
    );
    const m = new Matrix4();
    const pad = 0.45;
    groups.forEach((g, k) => {
      m.makeScale(g.x1 - g.x0 + pad * 2, 0.04, g.z1 - g.z0 + pad * 2);
      m.setPosition((g.x0 + g.x1) / 2, 0, (g.z0 + g.z1) / 2);
      tiles.setMatrixAt(k, m);
      tiles.setColorAt(k, new Color(g.supernode === null ? 0x1d2a3d : k % 2 ? 0x222a36 : 0x262f3c));
    });
    tiles.instanceMatrix.needsUpdate = true;
    this.root.add(tiles);
    this.tiles = tiles;

    if (groups.length <= MAX_GROUP_LABELS) {
      // Each name on the ground in front of its group (in the aisle), left-aligned.
      const extent = Math.max(L.x1 - L.x0, L.z1 - L.z0);
      const height = Math.max(0.35, Math.min(GROUP_GAP * 0.3, extent * 0.022));
      for (const g of groups) {
        const label = makeLabel(g.name, { height, colour: "#c9d3e3" });
        label.position.set(g.x0 + label.scale.x / 2, height * 0.45, g.z1 + pad + height * 0.55);
        this.root.add(label);
      }
    }
  }

  private buildTiers(): void {
    const L = this.layout;
    const tiers = this.floor.tiers ?? [];
    if (!tiers.length) return;
    const extent = Math.max(L.x1 - L.x0, L.z1 - L.z0);
    const gap = Math.max(1.6, extent * 0.05);
    const inset = Math.min(1, extent * 0.02);
    const w = L.x1 - L.x0 - inset * 2;
    const d = L.z1 - L.z0 - inset * 2;
    const rackIndex = this.instanceOf;
    tiers.forEach((tier, k) => {
      const y = RACK.h + gap * (k + 1);
      this.tierHeights.push(y);
      const colour = TIER_COLOURS[tier.kind] ?? 0x94a3b8;
      const plane = new Mesh(
        new PlaneGeometry(w, d),
        new MeshBasicMaterial({ color: colour, transparent: true, opacity: 0.05, side: DoubleSide, depthWrite: false }),
      );
      plane.rotation.x = -Math.PI / 2;
      plane.position.set((L.x0 + L.x1) / 2, y, (L.z0 + L.z1) / 2);
      plane.renderOrder = 2;
      this.root.add(plane);
      const frame = new LineSegments(
        new EdgesGeometry(new PlaneGeometry(w, d)),
        new LineBasicMaterial({ color: colour, transparent: true, opacity: 0.75 }),
      );
      frame.rotation.x = -Math.PI / 2;
      frame.position.copy(plane.position);
      this.root.add(frame);
      const label = makeLabel(`${tier.label} × ${tier.count.toLocaleString("en-US")}`, {
        height: Math.max(0.25, extent * 0.016),
        colour: "#e6e9ee",
        background: `#${colour.toString(16).padStart(6, "0")}cc`,
        bold: true,
      });
      // On the tier's back edge, right corner: above the far racks, inside the framed bounds.
      label.position.set(L.x1 - inset - label.scale.x / 2 - 0.2, y + label.scale.y * 0.6, L.z0 + inset);
      this.root.add(label);
      if (tier.racks.length && tier.racks.length <= MAX_TIER_LINES) {
        const pts: number[] = [];
        for (const rackId of tier.racks) {
          const i = rackIndex.get(rackId);
          if (i === undefined) continue;
          pts.push(
            this.centres[i * 3],
            RACK.h,
            this.centres[i * 3 + 2],
            this.centres[i * 3],
            y,
            this.centres[i * 3 + 2],
          );
        }
        if (pts.length) {
          this.root.add(
            segments(new Float32Array(pts), new LineBasicMaterial({ color: colour, transparent: true, opacity: 0.6 })),
          );
        }
      }
    });
  }

  /** Draw the fabric switches at their tiers and the CDUs over their racks (replacing any
   *  drawn before). CDUs hover just above the racks, below the first tier. */
  setMarkers(switches: SwitchList | null, cdus: CduList | null): FloorMarkers {
    if (this.markers) {
      this.root.remove(this.markers.root);
      this.markers.root.traverse((o) => {
        const mesh = o as InstancedMesh;
        mesh.geometry?.dispose();
      });
    }
    const rackXZ = (rack: number): readonly [number, number] | null => {
      const i = this.instanceOf.get(rack);
      return i === undefined ? null : [this.centres[i * 3], this.centres[i * 3 + 2]];
    };
    const tiers = this.floor.tiers ?? [];
    const tierY = (kind: string): number | null => {
      const k = tiers.findIndex((t) => t.kind === kind);
      return k < 0 ? null : (this.tierHeights[k] ?? null);
    };
    const L = this.layout;
    const first = this.tierHeights.length ? this.tierHeights[0] : RACK.h + 2;
    const markers = new FloorMarkers(switches, cdus);
    markers.build(
      switches ? switchPlaces(switches, rackXZ, tierY, L) : null,
      cdus ? cduPlaces(cdus, rackXZ, RACK.h + Math.min(0.6, (first - RACK.h) / 2)) : null,
      (kind) => TIER_COLOURS[kind] ?? 0x94a3b8,
    );
    this.root.add(markers.root);
    this.markers = markers;
    return markers;
  }

  pick(raycaster: Raycaster): PickResult | null {
    const hit = this.pickInstance(raycaster);
    if (hit)
      return { kind: "rack", id: this.keys[hit.index], index: hit.index, point: hit.point, distance: hit.distance };
    // Between the racks: the supernode's ground tile (network groups have none to select).
    if (!this.tiles) return null;
    for (const tile of raycaster.intersectObject(this.tiles, false)) {
      const group = tile.instanceId === undefined ? undefined : this.layout.groups[tile.instanceId];
      if (group && group.supernode !== null) {
        return { kind: "supernode", id: group.supernode, index: -1, point: tile.point, distance: tile.distance };
      }
    }
    return null;
  }

  /** Tooltip text of a supernode tile. */
  describeSupernode(id: number): string {
    const i = this.floor.supernodes.id.indexOf(id);
    if (i < 0) return `supernode ${id}`;
    return `${this.floor.supernodes.name[i]} · ${this.floor.supernodes.cards[i].toLocaleString("en")} cards · double-click to open`;
  }

  locate(kind: ObjectKind, id: number): { centre: Vector3; radius: number; index: number } | null {
    if (kind === "supernode") {
      const g = this.layout.groups.find((group) => group.supernode === id);
      if (!g) return null;
      return {
        centre: new Vector3((g.x0 + g.x1) / 2, RACK.h / 2, (g.z0 + g.z1) / 2),
        radius: 0.5 * Math.hypot(g.x1 - g.x0, g.z1 - g.z0, RACK.h),
        index: -1,
      };
    }
    return super.locate(kind, id);
  }

  /** The supernode of the rack at instance `i` (null for network racks). */
  supernodeOf(i: number): number | null {
    return this.floor.racks.supernode[i] ?? null;
  }

  describe(i: number): string {
    const cards = this.floor.racks.cards[i];
    return `${this.floor.racks.name[i]} · ${this.groupName[i]}${cards ? ` · ${cards} cards` : " · network"}`;
  }

  protected routeTubeRadius(): number {
    return Math.max(0.12, (this.layout.x1 - this.layout.x0) / 400);
  }
}
