/**
 * Shapes of the API answers the panels read (after the serializers in twin/api,
 * twin/telemetry and twin/scenarios; the OpenAPI schema is the full reference).
 * Only the fields the panels use are listed.
 */
import type { AlertPayload } from "./host";
import type { KindInfo } from "./scenarioform";

export interface CursorPage<T> {
  next: string | null;
  previous: string | null;
  results: T[];
  count?: number;
}

export interface CardRow {
  id: number;
  display: string;
  cluster: number;
  supernode: number;
  server: number;
  rack: number;
  accelerator: number;
  index: number;
  slot: number;
  x: number | null;
  y: number | null;
  z: number | null;
  serial: string;
  uuid?: string;
  status: string;
}

export interface AcceleratorRow {
  id: number;
  name: string;
  vendor: string;
  slug: string;
  fp32_tflops: number | null;
  tf32_tflops: number | null;
  bf16_tflops: number | null;
  fp8_tflops: number | null;
  hbm_gib: number | null;
  hbm_tbps: number | null;
  tdp_w: number | null;
  idle_w: number | null;
  scaleup_links: number | null;
  scaleup_gbps: number | null;
}

export interface ServerRow {
  id: number;
  name: string;
  hostname: string;
  position: number;
  rack: number;
}

export interface RackRow {
  id: number;
  display: string;
  cluster: number;
  supernode: number | null;
  name: string;
  row: number;
  slot: number;
  power_budget_w: number;
  cooling: string;
  pue: number;
  power_w: number;
  utilization: number;
  facility_w: number;
  headroom_w: number;
}

/** GET /api/racks/<id>/geometry/: one definition, in api.ts, shared with the scene. */
export type { RackGeometry } from "../api";

export interface SuperNodeRow {
  id: number;
  display: string;
  cluster: number;
  name: string;
  index: number;
  fabric: string;
  card_count: number;
  dim_x: number | null;
  dim_y: number | null;
  dim_z: number | null;
  link_gbps: number | null;
  link_latency_ns: number | null;
  switch_latency_ns: number | null;
}

export interface LinkRow {
  id: number;
  display: string;
  cluster: number;
  a_card: number | null;
  a_device: number | null;
  a_kind: string | null;
  b_card: number | null;
  b_device: number | null;
  b_kind: string | null;
  kind: string;
  bandwidth_gbps: number;
  latency_ns: number;
  status: string;
}

export interface DeviceRow {
  id: number;
  name: string;
  kind: string;
  model: string;
  rack: number | null;
}

export interface AlertRow extends AlertPayload {
  url?: string;
  active?: boolean;
  peak?: number | null;
}

/** GET /api/telemetry/cards/<id>/ (twin.telemetry.api.card_live). */
export interface CardLive {
  card: number;
  serial: string;
  cluster: number;
  ts: number | null;
  age_s: number | null;
  stale: boolean;
  health: string;
  metrics: Record<string, number | null>;
  health_detail: { status: string; reasons: string; since: string } | null;
  alerts: AlertRow[];
  history?: { metric: string; points: [number, number | null][] };
}

/** GET /api/scenarios/ (list) and /api/scenarios/<id>/ (detail adds inputs, result). */
export interface ScenarioRun {
  id: number;
  kind: string;
  cluster: number | null;
  params?: Record<string, unknown>;
  status: string;
  progress: number;
  message: string;
  error: string;
  error_field?: string;
  cached: boolean;
  created_by?: string | null;
  created: string | null;
  started: string | null;
  finished: string | null;
  duration_s?: number | null;
  websocket?: string;
  result?: unknown;
  rows?: unknown;
}

export type ScenarioKinds = KindInfo[];

/** Messages of ws/scenarios/<id>/ (twin/scenarios/consumers.py). */
export type ScenarioMessage =
  | { type: "snapshot" | "finished"; run: ScenarioRun }
  | { type: "progress"; id: number; status: string; progress: number; message: string }
  | { type: "pong" }
  | { type: "error"; code: string; message: string };

export const HISTORY_METRICS: ReadonlyArray<string> = [
  "gpu_util",
  "power_w",
  "gpu_temp_c",
  "hbm_used_gib",
  "tensor_active",
  "nvlink_gbps",
];

export const FINAL_STATUSES: ReadonlySet<string> = new Set(["succeeded", "failed", "cancelled"]);
