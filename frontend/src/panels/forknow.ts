/**
 * The dashboard's "Fork now" button: one click freezes the cluster's live state into a
 * what-if run (POST /api/scenarios/ with `fork: true`, no events: "what happens from
 * here if nothing changes", the baseline a failure's what-if is compared with), opens
 * the run in the scenarios panel (which follows it live and shows the result when it
 * is done) and shows the run's progress on the button itself until it ends.
 *
 * The pure parts (`forkRequest`, `forkLabel`) are tested with vitest; `mountForkNow`
 * wires them to the API, polling GET /api/scenarios/<id>/ once a second while the run
 * is not final (the panel has the live socket; this is only the button's label).
 */
import { ApiError, type Api, type ScenarioRun } from "../api";
import { config } from "../config";
import { explain } from "./dom";

/** The POST body of "Fork now" for `cluster`. */
export function forkRequest(cluster: number): {
  kind: "whatif";
  cluster: number;
  params: { events: never[] };
  fork: true;
} {
  return { kind: "whatif", cluster, params: { events: [] }, fork: true };
}

/** The button's text for a run's state (null: no run going). */
export function forkLabel(run: { status: string; progress?: number | null } | null, final: readonly string[]): string {
  if (!run || final.includes(run.status)) return "Fork now";
  const p = typeof run.progress === "number" && Number.isFinite(run.progress) ? run.progress : 0;
  const pct = Math.round(Math.max(0, Math.min(1, p)) * 100);
  return run.status === "queued" ? "Forking… queued" : `Forking… ${pct} %`;
}

export interface ForkNowDeps {
  api: Api;
  clusterId(): number;
  /** Show run `id` in the scenarios panel (it follows it live and shows the result). */
  open(runId: number): Promise<void>;
  /** Poll period of the button's label (ms, default 1000). */
  pollMs?: number;
}

/** Wire the button and its status line; returns a function stopping the label's polling. */
export function mountForkNow(button: HTMLButtonElement, status: HTMLElement, deps: ForkNowDeps): () => void {
  const pollMs = deps.pollMs ?? 1000;
  let timer: number | null = null;
  let gen = 0;
  const final = () => config().scenario_final_statuses;

  const stop = () => {
    if (timer !== null) window.clearTimeout(timer);
    timer = null;
    gen += 1;
  };

  const show = (run: ScenarioRun) => {
    const done = final().includes(run.status);
    button.textContent = forkLabel(run, final());
    button.disabled = !done;
    button.dataset.status = run.status;
    button.dataset.runId = String(run.id);
    status.textContent = done ? `Fork #${run.id}: ${run.status}` : `Fork #${run.id} running`;
    return done;
  };

  const follow = (id: number, mine: number) => {
    timer = window.setTimeout(async () => {
      if (mine !== gen) return;
      try {
        const run = await deps.api.get<ScenarioRun>(`scenarios/${id}/`);
        if (mine !== gen) return;
        if (!show(run)) follow(id, mine);
      } catch (error) {
        if (mine !== gen) return;
        status.textContent = `Fork #${id}: ${explain(error)}`;
        button.textContent = "Fork now";
        button.disabled = false;
      }
    }, pollMs);
  };

  const start = async (): Promise<void> => {
    stop();
    const mine = gen;
    button.disabled = true;
    button.textContent = "Forking…";
    button.dataset.status = "submitting";
    status.textContent = "";
    try {
      const run = await deps.api.post<ScenarioRun>("scenarios/", forkRequest(deps.clusterId()));
      if (mine !== gen) return;
      const done = show(run);
      void deps.open(run.id);
      if (!done) follow(run.id, mine);
    } catch (error) {
      button.disabled = false;
      button.textContent = "Fork now";
      delete button.dataset.status;
      status.textContent =
        error instanceof ApiError && error.status === 403
          ? "Forking needs the scenarios permission (scenarios.add_scenariorun)."
          : `Could not fork: ${explain(error)}`;
    }
  };
  button.addEventListener("click", () => void start());
  return stop;
}
