/**
 * The slice of the REST API the dashboard reads, typed after the serializers in
 * twin/api (the OpenAPI schema at /api/schema/ is the full reference).
 *
 * Requests carry the session cookie (same origin), so the API applies exactly
 * the permissions of the logged-in user.
 */

export interface Page<T> {
  count?: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export interface Cluster {
  id: number;
  name: string;
  description?: string;
  preset?: string;
}

export interface ClusterSummary {
  cluster: number;
  name: string;
  counts: {
    supernodes: number;
    racks: number;
    servers: number;
    cards: number;
    devices: number;
    links: number;
    cards_by_status: Record<string, number>;
    devices_by_kind: Record<string, number>;
    links_by_kind: Record<string, number>;
    links_by_status: Record<string, number>;
  };
  power: {
    it_w: number;
    facility_w: number;
    pue: number | null;
    budget_w: number;
    utilization: number | null;
    racks_over_budget: { count: number; names: string[] };
  };
  racks_per_supernode: {
    min: number | null;
    max: number | null;
    avg: number | null;
    network_racks: number;
  };
}

export interface Rack {
  id: number;
  name: string;
  row: number;
  slot: number;
  supernode: number | null;
  power_budget_w: number;
  power_w: number;
  utilization: number;
}

/** An API answer other than 2xx, with the status so the page can say what to do. */
export class ApiError extends Error {
  readonly status: number;
  /** The decoded JSON body, if any: DRF's per-field errors for a 400. */
  body: unknown = null;

  constructor(status: number, message: string) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

/** Django's CSRF cookie (csrftoken), which session-authenticated writes must echo. */
export function csrfToken(): string {
  const match = /(?:^|;\s*)csrftoken=([^;]+)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]) : "";
}

export class Api {
  private readonly root: string;

  constructor(root: string) {
    this.root = root.endsWith("/") ? root : `${root}/`;
  }

  /** GET `path` (relative to the API root, or absolute from `/`) as JSON. */
  async get<T>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  /** POST JSON with the CSRF token from Django's cookie (session auth needs it). */
  async post<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("POST", path, body);
  }

  /** Absolute URL of an API path ("/..." paths are kept as they are). */
  url(path: string): string {
    return path.startsWith("/") ? path : this.root + path;
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      headers["X-CSRFToken"] = csrfToken();
    }
    const response = await fetch(this.url(path), {
      method,
      credentials: "same-origin",
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      let detail = response.statusText;
      let errorBody: unknown = null;
      try {
        errorBody = await response.json();
        if (errorBody && typeof errorBody === "object" && "detail" in errorBody) {
          detail = String(errorBody.detail);
        }
      } catch {
        // Not JSON: keep the status text.
      }
      const error = new ApiError(response.status, `${method} ${this.url(path)}: ${response.status} ${detail}`);
      error.body = errorBody;
      throw error;
    }
    return (await response.json()) as T;
  }

  clusters(): Promise<Page<Cluster>> {
    return this.get<Page<Cluster>>("clusters/?limit=1000");
  }

  summary(clusterId: number): Promise<ClusterSummary> {
    return this.get<ClusterSummary>(`clusters/${clusterId}/summary/`);
  }

  /** The first `limit` racks of a cluster in floor order (row, slot), with their draw. */
  racks(clusterId: number, limit = 1000): Promise<Page<Rack>> {
    return this.get<Page<Rack>>(`racks/?cluster=${clusterId}&ordering=row,slot&limit=${limit}`);
  }

  /** The whole floor of a cluster, columnar (the 3D overview; ~26k racks at a million cards). */
  floor(clusterId: number): Promise<Floor> {
    return this.get<Floor>(`clusters/${clusterId}/floor/`);
  }

  /** One supernode's cards (torus coordinates) and scale-up links, columnar. */
  supernodeGeometry(supernodeId: number): Promise<SupernodeGeometry> {
    return this.get<SupernodeGeometry>(`supernodes/${supernodeId}/geometry/`);
  }

  /** One rack's servers, cards and devices, with its draw against its budget. */
  rackGeometry(rackId: number): Promise<RackGeometry> {
    return this.get<RackGeometry>(`racks/${rackId}/geometry/`);
  }
}

/** GET /api/clusters/<id>/floor/ (the data contract's shape). */
export interface Floor {
  cluster: number;
  name: string;
  preset: string;
  counts: { supernodes: number; racks: number; cards: number };
  racks: {
    id: number[];
    name: string[];
    row: number[];
    slot: number[];
    supernode: Array<number | null>;
    budget_w: number[];
    cards: number[];
  };
  supernodes: {
    id: number[];
    name: string[];
    index: number[];
    fabric: string[];
    dims: Array<number[] | null>;
    cards: number[];
  };
  tiers: Array<{ kind: string; label: string; count: number; racks: number[] }>;
}

/** GET /api/supernodes/<id>/geometry/. */
export interface SupernodeGeometry {
  supernode: number;
  name: string;
  cluster: number;
  fabric: string;
  dims: number[] | null;
  cards: {
    id: number[];
    serial: string[];
    index: number[];
    x: Array<number | null>;
    y: Array<number | null>;
    z: Array<number | null>;
    rack: number[];
    server: number[];
    slot: number[];
    status: string[];
  };
  links: { id: number[]; a: number[]; b: number[]; kind: string[]; status: string[]; wrap: boolean[] };
}

/** GET /api/racks/<id>/geometry/. */
export interface RackGeometry {
  rack: number;
  name: string;
  cluster: number;
  supernode: number | null;
  row: number;
  slot: number;
  budget_w: number;
  power_w: number;
  /** Servers' overhead + devices: power_w without the cards' TDP. */
  static_w?: number;
  servers: Array<{
    id: number;
    name: string;
    position: number;
    cards: Array<{ id: number; serial: string; slot: number; status: string; tdp_w?: number }>;
  }>;
  /** Network devices of the rack; `server` set for those inside a server (PCIe switch, NIC). */
  devices: Array<{ id: number; name: string; kind: string; server?: number | null }>;
}
