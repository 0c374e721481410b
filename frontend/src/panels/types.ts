/**
 * Shapes the panels read that the OpenAPI schema does not describe (the REST
 * answers' types are generated from it: see ../api/types.ts): the card's live
 * endpoint, a plain-dict view, and the scenario run's websocket messages.
 */
import type { Alert, ScenarioRun, ScenarioStatus } from "../api";

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
  alerts: Alert[];
  history?: { metric: string; points: [number, number | null][] };
}

/**
 * A run as ws/scenarios/<id>/ describes it (twin.scenarios.consumers.run_state):
 * the REST run's status fields, and its result once it is final.
 */
export type RunState = Pick<
  ScenarioRun,
  | "id"
  | "kind"
  | "status"
  | "progress"
  | "message"
  | "error"
  | "error_field"
  | "cached"
  | "cluster"
  | "started"
  | "finished"
> & { created: string | null; result?: unknown };

/** Messages of ws/scenarios/<id>/ (twin/scenarios/consumers.py). */
export type ScenarioMessage =
  | { type: "snapshot" | "finished"; run: RunState }
  | { type: "progress"; id: number; status: ScenarioStatus; progress: number; message: string }
  | { type: "pong" }
  | { type: "error"; code: string; message: string };
