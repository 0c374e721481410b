/**
 * What the scene fetched about one cluster, kept so moving around is instant:
 * its floor (asked for once, possibly before the page is up), the last few
 * supernodes' and racks' geometry, and where each card seen so far lives.
 *
 * Level of detail: a cluster opens as its floor (one value per rack, however
 * many cards); a supernode's or rack's geometry is fetched only when it is
 * opened, and the last {@link GEOMETRY_CACHE} of each are kept.
 */
import type { Api, Card, Floor, RackGeometry, SupernodeGeometry } from "../api";

/** Supernodes (and racks) whose geometry is kept after leaving them. */
export const GEOMETRY_CACHE = 8;

/** Where a card lives: enough to open the view that shows it. */
export interface CardInfo {
  id: number;
  supernode: number | null;
  rack: number | null;
  serial: string;
}

/** A least-recently-used map of a fixed size. */
export class Lru<V> {
  private readonly map = new Map<number, V>();
  constructor(private readonly size: number) {}
  get(key: number): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: number, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.size) this.map.delete(this.map.keys().next().value as number);
  }
  clear(): void {
    this.map.clear();
  }
}

let prefetched: { cluster: number; request: Promise<Floor> } | null = null;

export class GeometryCache {
  /** The cluster the cached data belongs to. */
  cluster = 0;
  /** The floor once it has arrived (names, the way back), else null. */
  floor: Floor | null = null;
  private floorRequest: Promise<Floor> | null = null;
  private readonly supernodes = new Lru<SupernodeGeometry>(GEOMETRY_CACHE);
  private readonly racks = new Lru<RackGeometry>(GEOMETRY_CACHE);
  private readonly cards = new Map<number, CardInfo>();

  constructor(private readonly api: Api) {}

  /** Start loading a cluster's floor before the page is up (the URL names it). */
  static prefetchFloor(api: Api, clusterId: number): void {
    const request = api.floor(clusterId);
    request.catch(() => undefined);
    prefetched = { cluster: clusterId, request };
  }

  /**
   * Forget everything and start asking for `clusterId`'s floor (the prefetched
   * request if it was for this cluster). The promise resolves with the floor
   * once it is stored; it is never left rejected unhandled.
   */
  reset(clusterId: number): Promise<Floor> {
    this.cluster = clusterId;
    this.floor = null;
    this.supernodes.clear();
    this.racks.clear();
    this.cards.clear();
    const p = prefetched;
    prefetched = null;
    const request = p && p.cluster === clusterId ? p.request : this.api.floor(clusterId);
    this.floorRequest = request.then((floor) => {
      if (this.cluster === clusterId) this.floor = floor;
      return floor;
    });
    this.floorRequest.catch(() => undefined);
    return this.floorRequest;
  }

  /** The floor: the stored one, the request in flight, else a new request. */
  async loadFloor(): Promise<Floor> {
    const floor = this.floor ?? (await (this.floorRequest ?? this.api.floor(this.cluster)));
    this.floor = floor;
    return floor;
  }

  async supernode(id: number): Promise<SupernodeGeometry> {
    let g = this.supernodes.get(id);
    if (!g) {
      g = await this.api.supernodeGeometry(id);
      this.supernodes.set(id, g);
    }
    return g;
  }

  async rack(id: number): Promise<RackGeometry> {
    let g = this.racks.get(id);
    if (!g) {
      g = await this.api.rackGeometry(id);
      this.racks.set(id, g);
    }
    return g;
  }

  /** Note where the cards of an opened supernode live. */
  noteSupernodeCards(g: SupernodeGeometry): void {
    g.cards.id.forEach((cid, i) =>
      this.cards.set(cid, { id: cid, supernode: g.supernode, rack: g.cards.rack[i], serial: g.cards.serial[i] }),
    );
  }

  /** Note where the cards of an opened rack live. */
  noteRackCards(g: RackGeometry): void {
    for (const s of g.servers) {
      for (const c of s.cards)
        this.cards.set(c.id, { id: c.id, supernode: g.supernode, rack: g.rack, serial: c.serial });
    }
  }

  /** A card seen in an opened view, if any. */
  knownCard(id: number): CardInfo | undefined {
    return this.cards.get(id);
  }

  /** Where a card lives: from an opened view, else asked of the API (and kept). */
  async card(id: number): Promise<CardInfo> {
    const known = this.cards.get(id);
    if (known) return known;
    const card = await this.api.get<Card>(`cards/${id}/`);
    const info = { id: card.id, supernode: card.supernode, rack: card.rack, serial: card.serial };
    this.cards.set(id, info);
    return info;
  }

  /** A supernode's name from the floor ("supernode <id>" before it arrives). */
  supernodeName(id: number): string {
    const k = this.floor?.supernodes.id.indexOf(id) ?? -1;
    return k >= 0 && this.floor ? this.floor.supernodes.name[k] : `supernode ${id}`;
  }
}
