/**
 * Rack view (GET /api/racks/<id>/geometry/): servers stacked by position with
 * their cards across the front (the cards are the coloured instances), network
 * devices above them, and the rack's power bar — draw against budget — beside it.
 */
import {
  BoxGeometry,
  Color,
  EdgesGeometry,
  InstancedMesh,
  LineBasicMaterial,
  LineSegments,
  Matrix4,
  Mesh,
  MeshLambertMaterial,
  type Raycaster,
  type Sprite,
} from "three";

import type { RackGeometry } from "../api";
import { formatPower, utilisationColour } from "../format";
import { SERVER, rackPositions } from "../layout";
import type { ObjectKind } from "../panels/host";
import { makeLabel } from "./labels";
import { InstancedView, type PickResult } from "./view";

const MAX_SLAB_LABELS = 48;

export class RackView extends InstancedView {
  readonly kind = "rack" as const;
  readonly id: number;
  readonly geometry: RackGeometry;
  private readonly cardInfo: Array<{ serial: string; server: string; slot: number; status: string }> = [];
  private readonly height: number;
  private barFill: Mesh | null = null;
  private barLabel: Sprite | null = null;
  /** Network devices drawn (standalone slabs and in-server blocks). */
  deviceCount = 0;
  /** Each card's TDP, in instance order: what a card without a reading counts for. */
  private readonly tdp: Float64Array;
  /** The draw the bar shows (W): nameplate until live power frames arrive. */
  drawW: number;

  constructor(geometry: RackGeometry) {
    // Devices inside a server (PCIe switches, NICs) sit on its slab; the others
    // (leaf and spine switches of a network rack) get slabs of their own.
    const standalone = geometry.devices.filter((d) => d.server === null || d.server === undefined);
    const inServer = geometry.devices.filter((d) => d.server !== null && d.server !== undefined);
    const pos = rackPositions(geometry.servers, standalone.length);
    const ids: number[] = [];
    const info: Array<{ serial: string; server: string; slot: number; status: string }> = [];
    for (const s of geometry.servers) {
      for (const c of s.cards) {
        ids.push(c.id);
        info.push({ serial: c.serial, server: s.name, slot: c.slot, status: c.status });
      }
    }
    const n = ids.length;
    const tdp = Float64Array.from(geometry.servers.flatMap((s) => s.cards.map((c) => c.tdp_w ?? 0)));
    const sizes = new Float32Array(n * 3);
    for (let i = 0; i < n; i++) {
      const per = 8;
      sizes[i * 3] = ((SERVER.w - 0.1) / per) * 0.78;
      sizes[i * 3 + 1] = SERVER.h * 0.72;
      sizes[i * 3 + 2] = 0.12;
    }
    super(ids, pos.cards, sizes);
    this.tdp = tdp;
    this.drawW = geometry.power_w;
    this.id = geometry.rack;
    this.geometry = geometry;
    this.cardInfo = info;
    this.height = Math.max(pos.height, SERVER.pitch * 4);
    this.homeDirection.set(0.45, 0.35, 1);
    this.deviceCount = geometry.devices.length;

    // Server and device slabs.
    const slabs = geometry.servers.length + standalone.length;
    const slabMesh = new InstancedMesh(
      new BoxGeometry(1, 1, 1),
      new MeshLambertMaterial({ color: 0xffffff }),
      Math.max(1, slabs),
    );
    slabMesh.count = slabs;
    const m = new Matrix4();
    for (let k = 0; k < slabs; k++) {
      m.makeScale(SERVER.w, SERVER.h, SERVER.d);
      m.setPosition(0, pos.slabY[k], 0);
      slabMesh.setMatrixAt(k, m);
      slabMesh.setColorAt(k, new Color(k < geometry.servers.length ? 0x3a4352 : 0x2d4a6b));
    }
    this.root.add(slabMesh);
    if (slabs <= MAX_SLAB_LABELS) {
      const names = [
        ...geometry.servers.map((s) => s.name),
        ...standalone.map((d) => `${d.name} (${d.kind.replaceAll("_", " ")})`),
      ];
      names.forEach((name, k) => {
        const label = makeLabel(name, { height: SERVER.h * 0.3, colour: "#c9d3e3" });
        label.position.set(-SERVER.w / 2 - 0.12 - label.scale.x / 2, pos.slabY[k], SERVER.d / 2);
        this.root.add(label);
      });
    }
    // In-server devices: small blocks along the back of their server's slab.
    if (inServer.length) {
      const slabOf = new Map<number, number>();
      geometry.servers.forEach((srv, k) => slabOf.set(srv.id, k));
      const blocks = new InstancedMesh(
        new BoxGeometry(1, 1, 1),
        new MeshLambertMaterial({ color: 0xffffff }),
        inServer.length,
      );
      const perServer = new Map<number, number>();
      inServer.forEach((d, k) => {
        const slab = slabOf.get(d.server as number) ?? 0;
        const n = perServer.get(d.server as number) ?? 0;
        perServer.set(d.server as number, n + 1);
        m.makeScale(0.3, SERVER.h * 0.55, 0.1);
        m.setPosition(-SERVER.w / 2 + 0.25 + n * 0.36, pos.slabY[slab], -SERVER.d / 2 - 0.06);
        blocks.setMatrixAt(k, m);
        blocks.setColorAt(k, new Color(d.kind.includes("nic") ? 0x0ea5e9 : 0x94a3b8));
      });
      this.root.add(blocks);
    }
    // The rack's frame.
    const frame = new LineSegments(
      new EdgesGeometry(new BoxGeometry(SERVER.w + 0.16, this.height + 0.1, SERVER.d + 0.16)),
      new LineBasicMaterial({ color: 0x7c8aa0 }),
    );
    frame.position.set(0, this.height / 2, 0);
    this.root.add(frame);
    const title = makeLabel(geometry.name, { height: 0.14, colour: "#e6e9ee", bold: true });
    title.position.set(0, this.height + 0.22, 0);
    this.root.add(title);

    // Power bar: the outline is the budget, the fill the draw.
    const barX = SERVER.w / 2 + 0.45;
    const outline = new LineSegments(
      new EdgesGeometry(new BoxGeometry(0.22, this.height, 0.22)),
      new LineBasicMaterial({ color: 0x98a2b3 }),
    );
    outline.position.set(barX, this.height / 2, 0);
    this.root.add(outline);
    this.setPower(geometry.power_w);

    this.bounds.center.set(0.15, this.height / 2, 0);
    this.bounds.radius = Math.max(1.9, this.height * 0.75);
  }

  /**
   * The rack's live draw from its cards' power readings (`values`, instance
   * order, NaN where a card has not reported: its TDP is counted instead) plus
   * the static draw of servers and devices — the same sum the cluster view's
   * rack draw is (twin/live/frames.py AGGREGATE "draw").
   */
  liveDraw(values: ArrayLike<number>): number {
    let w = this.geometry.static_w ?? this.geometry.power_w - this.tdp.reduce((a, b) => a + b, 0);
    for (let i = 0; i < this.tdp.length; i++) {
      const v = values[i];
      w += v === v ? v : this.tdp[i];
    }
    return w;
  }

  /** Show the rack's draw against its budget (the bar's fill and label). */
  setPower(drawW: number): void {
    this.drawW = drawW;
    const g = this.geometry;
    const budget = g.budget_w > 0 ? g.budget_w : 1;
    const u = Math.max(0, drawW / budget);
    const h = Math.max(0.01, Math.min(1.08, u) * this.height);
    if (this.barFill) {
      this.root.remove(this.barFill);
      this.barFill.geometry.dispose();
      (this.barFill.material as MeshLambertMaterial).dispose();
    }
    const fill = new Mesh(
      new BoxGeometry(0.18, h, 0.18),
      new MeshLambertMaterial({ color: utilisationColour(drawW, budget) }),
    );
    fill.position.set(SERVER.w / 2 + 0.45, h / 2, 0);
    this.barFill = fill;
    this.root.add(fill);
    if (this.barLabel) {
      this.root.remove(this.barLabel);
      this.barLabel.material.map?.dispose();
      this.barLabel.material.dispose();
    }
    const label = makeLabel(`${formatPower(drawW)} of ${formatPower(g.budget_w)}`, {
      height: 0.1,
      colour: "#e6e9ee",
      background: "rgba(15,19,25,0.8)",
    });
    label.position.set(SERVER.w / 2 + 0.45 + label.scale.x / 2 + 0.18, Math.min(h, this.height), 0);
    this.barLabel = label;
    this.root.add(label);
  }

  instanceKind(): ObjectKind {
    return "card";
  }

  pick(raycaster: Raycaster): PickResult | null {
    const hit = this.pickInstance(raycaster);
    if (!hit) return null;
    return { kind: "card", id: this.keys[hit.index], index: hit.index, point: hit.point, distance: hit.distance };
  }

  describe(i: number): string {
    const c = this.cardInfo[i];
    return `${c.serial} · ${c.server} slot ${c.slot}${c.status !== "ok" ? ` · ${c.status}` : ""}`;
  }

  protected routeTubeRadius(): number {
    return 0.03;
  }
}
