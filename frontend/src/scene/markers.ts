/**
 * Switch and CDU markers over the floor: two `InstancedMesh`es (one draw call each,
 * whatever the count), placed by plant.ts's pure `switchPlaces` / `cduPlaces`. A
 * marker is picked by a raycast like a rack; a right-click on one offers the
 * what-if of its failure (contextmenu.ts `markerFailure`).
 *
 * Switches are small slabs in their tier's colour at their tier's height; CDUs are
 * cyan discs over the centre of the racks on their loop.
 */
import {
  BoxGeometry,
  Color,
  CylinderGeometry,
  Group,
  InstancedMesh,
  Matrix4,
  MeshLambertMaterial,
  Vector3,
  type Raycaster,
} from "three";

import type { Marker } from "../panels/contextmenu";
import type { CduList, MarkerPlaces, SwitchList } from "../plant";

/** The floor's switches beyond this many are not drawn (the tier frame stands for them). */
export const MAX_SWITCH_MARKERS = 20_000;

export const CDU_COLOUR = 0x22d3ee;

export interface MarkerHit {
  marker: Marker;
  /** A label for the tooltip and the menu. */
  label: string;
  distance: number;
}

/** The markers of one floor; `root` goes into the floor's scene group. */
export class FloorMarkers {
  readonly root = new Group();
  private switchMesh: InstancedMesh | null = null;
  private cduMesh: InstancedMesh | null = null;
  private switchIndex: number[] = [];
  private cduIndex: number[] = [];
  private switchXYZ: Float32Array = new Float32Array(0);
  private cduXYZ: Float32Array = new Float32Array(0);

  constructor(
    private readonly switches: SwitchList | null,
    private readonly cdus: CduList | null,
  ) {}

  /** Build the meshes from the places (switch colour per kind, a hex number). */
  build(switchAt: MarkerPlaces | null, cduAt: MarkerPlaces | null, colourOf: (kind: string) => number): void {
    const m = new Matrix4();
    const colour = new Color();
    if (this.switches && switchAt && switchAt.index.length) {
      const n = Math.min(switchAt.index.length, MAX_SWITCH_MARKERS);
      const mesh = new InstancedMesh(new BoxGeometry(0.3, 0.14, 0.5), new MeshLambertMaterial({ color: 0xffffff }), n);
      for (let j = 0; j < n; j++) {
        m.makeTranslation(switchAt.xyz[j * 3], switchAt.xyz[j * 3 + 1], switchAt.xyz[j * 3 + 2]);
        mesh.setMatrixAt(j, m);
        mesh.setColorAt(j, colour.setHex(colourOf(this.switches.kind[switchAt.index[j]])));
      }
      mesh.instanceMatrix.needsUpdate = true;
      mesh.name = "switch-markers";
      this.root.add(mesh);
      this.switchMesh = mesh;
      this.switchIndex = switchAt.index.slice(0, n);
      this.switchXYZ = switchAt.xyz.slice(0, n * 3);
    }
    if (this.cdus && cduAt && cduAt.index.length) {
      const n = cduAt.index.length;
      const mesh = new InstancedMesh(
        new CylinderGeometry(0.45, 0.45, 0.22, 20),
        new MeshLambertMaterial({ color: CDU_COLOUR }),
        n,
      );
      for (let j = 0; j < n; j++) {
        m.makeTranslation(cduAt.xyz[j * 3], cduAt.xyz[j * 3 + 1], cduAt.xyz[j * 3 + 2]);
        mesh.setMatrixAt(j, m);
      }
      mesh.instanceMatrix.needsUpdate = true;
      mesh.name = "cdu-markers";
      this.root.add(mesh);
      this.cduMesh = mesh;
      this.cduIndex = cduAt.index;
      this.cduXYZ = cduAt.xyz;
    }
  }

  /** How many of each are drawn. */
  counts(): { switches: number; cdus: number } {
    return { switches: this.switchIndex.length, cdus: this.cduIndex.length };
  }

  /** The nearest marker under the ray, if any. */
  pick(raycaster: Raycaster): MarkerHit | null {
    let best: MarkerHit | null = null;
    if (this.switchMesh && this.switches) {
      const hit = raycaster.intersectObject(this.switchMesh, false)[0];
      if (hit && hit.instanceId !== undefined) {
        const k = this.switchIndex[hit.instanceId];
        best = {
          marker: { kind: "switch", id: this.switches.id[k] },
          label: `${this.switches.name[k]} · ${this.switches.kind[k]} switch`,
          distance: hit.distance,
        };
      }
    }
    if (this.cduMesh && this.cdus) {
      const hit = raycaster.intersectObject(this.cduMesh, false)[0];
      if (hit && hit.instanceId !== undefined && (!best || hit.distance < best.distance)) {
        const k = this.cduIndex[hit.instanceId];
        const racks = this.cdus.racks[k]?.length ?? 0;
        best = {
          marker: { kind: "cdu", key: this.cdus.key[k] },
          label: `CDU ${this.cdus.key[k]} · ${racks} rack${racks === 1 ? "" : "s"}`,
          distance: hit.distance,
        };
      }
    }
    return best;
  }

  /** The centre of a marker (the test hook aims a right-click there), or null. */
  centreOf(marker: Marker): Vector3 | null {
    if (marker.kind === "switch" && this.switches) {
      const j = this.switchIndex.findIndex((k) => this.switches?.id[k] === marker.id);
      if (j >= 0) return new Vector3(this.switchXYZ[j * 3], this.switchXYZ[j * 3 + 1], this.switchXYZ[j * 3 + 2]);
    }
    if (marker.kind === "cdu" && this.cdus) {
      const j = this.cduIndex.findIndex((k) => this.cdus?.key[k] === marker.key);
      if (j >= 0) return new Vector3(this.cduXYZ[j * 3], this.cduXYZ[j * 3 + 1], this.cduXYZ[j * 3 + 2]);
    }
    return null;
  }

  /** The markers drawn, as the what-if names them (the test hook's list). */
  list(): Marker[] {
    const out: Marker[] = [];
    if (this.switches) for (const k of this.switchIndex) out.push({ kind: "switch", id: this.switches.id[k] });
    if (this.cdus) for (const k of this.cduIndex) out.push({ kind: "cdu", key: this.cdus.key[k] });
    return out;
  }
}
