/**
 * What the three views (cluster floor, supernode, rack) have in common: one
 * `InstancedMesh` of coloured boxes keyed by rack or card id, a selection
 * marker, a route overlay, and picking.
 *
 * Colours: `instanceColor` is a plain Float32Array the live frames write into
 * through the palette's lookup table (colour.ts `paint`), then one
 * `needsUpdate`; nothing per instance is allocated on a frame.
 */
import {
  BoxGeometry,
  BufferGeometry,
  CylinderGeometry,
  EdgesGeometry,
  Float32BufferAttribute,
  Group,
  InstancedBufferAttribute,
  InstancedMesh,
  LineBasicMaterial,
  LineSegments,
  Matrix4,
  Mesh,
  MeshBasicMaterial,
  MeshLambertMaterial,
  OctahedronGeometry,
  Quaternion,
  Sphere,
  Vector3,
  type Raycaster,
} from "three";

import { paint, type Palette } from "../colour";
import type { ObjectKind } from "../panels/host";
import type { ViewKind } from "../frames";

export interface PickResult {
  kind: ObjectKind;
  id: number;
  /** Instance index (cards/racks) or link position. */
  index: number;
  point: Vector3;
  distance: number;
}

/** One node of a route to draw: a card of the view, or a point in space. */
export interface RoutePoint {
  position: Vector3;
  instance: number | null;
  /** The hop from the previous point is a torus wrap-around: drawn as two
   *  stubs (previous → [0], [1] → this), like the link itself. */
  wrapStubs?: [Vector3, Vector3];
}

const MARK = new LineBasicMaterial({ color: 0xffffff, depthTest: false, transparent: true });
const ROUTE_CARD = new LineBasicMaterial({ color: 0x22d3ee, depthTest: false, transparent: true });
const ROUTE_TUBE = new MeshBasicMaterial({ color: 0x22d3ee, depthTest: false, transparent: true, opacity: 0.95 });
const UNIT_EDGES = new EdgesGeometry(new BoxGeometry(1, 1, 1));
const Y_AXIS = new Vector3(0, 1, 0);

export abstract class InstancedView {
  abstract readonly kind: ViewKind;
  abstract readonly id: number | null;
  readonly root = new Group();
  readonly keys: number[];
  readonly instanceOf = new Map<number, number>();
  readonly mesh: InstancedMesh;
  /** Per instance: box centre and size (3 floats each). */
  readonly centres: Float32Array;
  readonly sizes: Float32Array;
  readonly colours: Float32Array;
  readonly codes: Uint16Array;
  /** Per instance: a forced colour code (≥ 0), e.g. network racks; −1 = from the value. */
  fixed: Int16Array | undefined;
  /** Camera's home: the sphere to frame and the direction to look from. */
  bounds = new Sphere();
  homeDirection = new Vector3(-0.55, 0.75, 1);
  private marker: LineSegments | null = null;
  private readonly routeGroup = new Group();
  private routeSegments = 0;

  protected constructor(
    keys: ArrayLike<number>,
    centres: Float32Array,
    sizes: Float32Array,
    material?: MeshLambertMaterial,
  ) {
    this.keys = Array.from(keys);
    this.keys.forEach((key, i) => this.instanceOf.set(key, i));
    const n = this.keys.length;
    this.centres = centres;
    this.sizes = sizes;
    this.colours = new Float32Array(n * 3).fill(0.3);
    this.codes = new Uint16Array(n);
    this.mesh = new InstancedMesh(
      new BoxGeometry(1, 1, 1),
      material ?? new MeshLambertMaterial({ color: 0xffffff }),
      n,
    );
    const m = new Matrix4();
    for (let i = 0; i < n; i++) {
      m.makeScale(sizes[i * 3], sizes[i * 3 + 1], sizes[i * 3 + 2]);
      m.setPosition(centres[i * 3], centres[i * 3 + 1], centres[i * 3 + 2]);
      this.mesh.setMatrixAt(i, m);
    }
    this.mesh.instanceMatrix.needsUpdate = true;
    this.mesh.instanceColor = new InstancedBufferAttribute(this.colours, 3);
    this.mesh.computeBoundingSphere();
    this.mesh.computeBoundingBox();
    this.root.add(this.mesh);
    this.routeGroup.renderOrder = 10;
    this.root.add(this.routeGroup);
  }

  /** Recolour every instance from per-instance values (and budgets); returns ms spent. */
  recolour(palette: Palette, values: ArrayLike<number>, budgets?: ArrayLike<number>): number {
    const t0 = performance.now();
    paint(palette, values, this.colours, this.codes, budgets, this.fixed);
    (this.mesh.instanceColor as InstancedBufferAttribute).needsUpdate = true;
    return performance.now() - t0;
  }

  centreOf(i: number, out = new Vector3()): Vector3 {
    return out.set(this.centres[i * 3], this.centres[i * 3 + 1], this.centres[i * 3 + 2]);
  }

  /** Radius of an instance's box (for framing it). */
  radiusOf(i: number): number {
    return 0.5 * Math.hypot(this.sizes[i * 3], this.sizes[i * 3 + 1], this.sizes[i * 3 + 2]);
  }

  /** What the view draws that a click can open (cards, racks, links). */
  abstract pick(raycaster: Raycaster): PickResult | null;

  /** Where an object of this view is (for fly-to), or null if it is not drawn here. */
  locate(kind: ObjectKind, id: number): { centre: Vector3; radius: number; index: number } | null {
    if (kind === this.instanceKind()) {
      const i = this.instanceOf.get(id);
      if (i === undefined) return null;
      return { centre: this.centreOf(i), radius: this.radiusOf(i), index: i };
    }
    return null;
  }

  /** "card" or "rack": what the instances are. */
  abstract instanceKind(): ObjectKind;

  /** Short text for a hover tooltip. */
  abstract describe(i: number): string;

  /** Outline one object (null: remove the outline). */
  mark(kind: ObjectKind | null, id: number | null): void {
    if (this.marker) {
      this.root.remove(this.marker);
      this.marker = null;
    }
    if (kind === null || id === null) return;
    const where = this.locate(kind, id);
    if (!where) return;
    const marker = new LineSegments(UNIT_EDGES, MARK);
    marker.renderOrder = 20;
    if (where.index >= 0 && kind === this.instanceKind()) {
      const i = where.index;
      marker.scale.set(
        this.sizes[i * 3] * 1.25 + 0.08,
        this.sizes[i * 3 + 1] * 1.25 + 0.08,
        this.sizes[i * 3 + 2] * 1.25 + 0.08,
      );
    } else {
      marker.scale.setScalar(where.radius * 2);
    }
    marker.position.copy(where.centre);
    this.marker = marker;
    this.root.add(marker);
  }

  /**
   * Draw a route: each hop as a tube between consecutive points (a wrap-around
   * hop as two stubs), and an outline around each card of the view on it.
   * Returns the hops drawn.
   */
  showRoute(points: RoutePoint[] | null): number {
    for (const child of [...this.routeGroup.children]) {
      this.routeGroup.remove(child);
      if (child instanceof Mesh) (child.geometry as BufferGeometry).dispose();
    }
    this.routeSegments = 0;
    if (!points || points.length === 0) return 0;
    const radius = this.routeTubeRadius();
    const tube = (a: Vector3, b: Vector3): void => {
      const length = a.distanceTo(b);
      if (length < 1e-6) return; // both ends in one box (cards of one rack on the floor)
      const mesh = new Mesh(new CylinderGeometry(radius, radius, length, 8, 1, true), ROUTE_TUBE);
      mesh.position.copy(a).add(b).multiplyScalar(0.5);
      mesh.quaternion.copy(new Quaternion().setFromUnitVectors(Y_AXIS, b.clone().sub(a).normalize()));
      mesh.renderOrder = 11;
      this.routeGroup.add(mesh);
    };
    // Every hop counts as drawn once its two ends are placed, however many tubes show it.
    for (let k = 1; k < points.length; k++) {
      const a = points[k - 1].position;
      const b = points[k].position;
      const stubs = points[k].wrapStubs;
      if (stubs) {
        tube(a, stubs[0]);
        tube(stubs[1], b);
      } else {
        tube(a, b);
      }
      this.routeSegments += 1;
    }
    for (const p of points) {
      if (p.instance === null) {
        // A hop between cards (NIC, switch): a small marker where the path turns.
        const node = new Mesh(new OctahedronGeometry(radius * 2.6), ROUTE_TUBE);
        node.position.copy(p.position);
        node.renderOrder = 12;
        this.routeGroup.add(node);
        continue;
      }
      const i = p.instance;
      const box = new LineSegments(UNIT_EDGES, ROUTE_CARD);
      box.scale.set(
        this.sizes[i * 3] * 1.5 + 0.1,
        this.sizes[i * 3 + 1] * 1.5 + 0.1,
        this.sizes[i * 3 + 2] * 1.5 + 0.1,
      );
      box.position.copy(this.centreOf(i));
      box.renderOrder = 12;
      this.routeGroup.add(box);
    }
    return this.routeSegments;
  }

  /** A sphere around the view and the route drawn in it (to frame both). */
  routeBounds(): Sphere {
    const sphere = this.bounds.clone();
    this.routeGroup.traverse((o) => {
      if (o !== this.routeGroup) sphere.expandByPoint(o.position);
    });
    return sphere;
  }

  /** Number of route segments currently drawn. */
  routeDrawn(): number {
    return this.routeSegments;
  }

  protected routeTubeRadius(): number {
    return 0.09;
  }

  /** Nearest instance hit by the ray (InstancedMesh raycast gives instanceId). */
  protected pickInstance(raycaster: Raycaster): { index: number; point: Vector3; distance: number } | null {
    const hits = raycaster.intersectObject(this.mesh, false);
    for (const hit of hits) {
      if (hit.instanceId !== undefined) return { index: hit.instanceId, point: hit.point, distance: hit.distance };
    }
    return null;
  }

  dispose(): void {
    this.root.traverse((obj) => {
      const o = obj as Mesh;
      if (o.geometry && o.geometry !== UNIT_EDGES) o.geometry.dispose();
      const mat = o.material;
      if (mat && !Array.isArray(mat) && mat !== MARK && mat !== ROUTE_CARD && mat !== ROUTE_TUBE) {
        const textured = mat as MeshBasicMaterial;
        textured.map?.dispose();
        mat.dispose();
      }
    });
  }
}

/** LineSegments from a flat list of points (2 per segment), optionally coloured per vertex. */
export function segments(points: Float32Array, material: LineBasicMaterial, colours?: Float32Array): LineSegments {
  const g = new BufferGeometry();
  g.setAttribute("position", new Float32BufferAttribute(points, 3));
  if (colours) g.setAttribute("color", new Float32BufferAttribute(colours, 3));
  g.computeBoundingSphere();
  return new LineSegments(g, material);
}
