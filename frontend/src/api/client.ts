/**
 * The client of the REST API: JSON requests with the session cookie (same
 * origin), so the API applies exactly the permissions of the logged-in user,
 * and the CSRF token on writes. The answers' types come from the server's
 * OpenAPI schema (types.ts).
 */
import type {
  ClusterSummary,
  Floor,
  PaginatedClusterList,
  PaginatedRackList,
  RackGeometry,
  SupernodeGeometry,
} from "./types";

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

  clusters(): Promise<PaginatedClusterList> {
    return this.get<PaginatedClusterList>("clusters/?limit=1000");
  }

  summary(clusterId: number): Promise<ClusterSummary> {
    return this.get<ClusterSummary>(`clusters/${clusterId}/summary/`);
  }

  /** The first `limit` racks of a cluster in floor order (row, slot), with their draw. */
  racks(clusterId: number, limit = 1000): Promise<PaginatedRackList> {
    return this.get<PaginatedRackList>(`racks/?cluster=${clusterId}&ordering=row,slot&limit=${limit}`);
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
