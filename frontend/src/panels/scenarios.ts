/**
 * The scenarios panel: the cluster's runs, a form built from GET /api/scenarios/kinds/
 * to start one (POST /api/scenarios/ with the session's CSRF token), live progress
 * over ws/scenarios/<id>/ (polling GET /api/scenarios/<id>/ every second if the
 * socket fails), and the result as a table and — when the kind has a chart hint —
 * a uPlot chart (a collective's busbw against message size, log x).
 *
 * The form's inputs are built by scenariofields.ts, the result drawn by
 * scenariorender.ts (the training kinds' bars, Pareto scatter and best table by
 * trainingrender.ts, whose "open this configuration" fills the training form and
 * runs it); this module wires them to the API and the run's socket.
 *
 * Who may start runs is asked once with OPTIONS /api/scenarios/ (DRF lists POST
 * under "actions" only for users allowed to); a 403 on submit says the same.
 */
import type uPlot from "uplot";

import { ApiError, type PaginatedScenarioRunList, type ScenarioKind, type ScenarioRun } from "../api";
import { config } from "../config";
import { button, chip, explain, h } from "./dom";
import { formatAgo, formatSeconds } from "./format";
import type { PanelHost } from "./host";
import { rawValue, renderFields, type FieldInput } from "./scenariofields";
import { buildParams, mapErrors, type KindInfo, type RawValue } from "./scenarioform";
import { renderChart, renderKindResult, renderTable } from "./scenariorender";
import { clusterOf, mountPlayback, type Playback } from "./playback";
import { renderScheduling } from "./scheduling";
import { renderJobTable } from "./schedulingjobs";
import { chartData, resultTable } from "./scenarioresult";
import { configurationParams, formValue, TRAINING_KINDS, type Config } from "./training";
import { renderTrainingResult, type TrainingView } from "./trainingrender";
import { mountWhatIfFloor } from "./whatiffloor";
import type { RunState, ScenarioMessage } from "./types";

export interface ScenariosOptions {
  /** Runs listed (default 20). */
  runs?: number;
  /** Poll period when the socket is unavailable (ms, default 1000). */
  pollMs?: number;
}

export interface ScenariosPanel {
  /** Reload kinds, permission and runs (the cluster changed). */
  reset(): Promise<void>;
  /** Show one run (and follow it live if it is not finished). */
  open(runId: number): Promise<void>;
  /**
   * The form set to `kind` with these fields' texts (the others at their defaults),
   * scrolled into view and not run: the 3D view's "What if this fails?".
   */
  prefill(kind: string, texts: Readonly<Record<string, string>>): void;
}

const PERMISSION_NOTE =
  "Starting runs needs the scenarios permission (scenarios.add_scenariorun): ask an administrator. " +
  "You can still look at the runs and their results.";

/** A run as the panel shows it: its websocket state, with the REST detail's fields once fetched. */
type ShownRun = RunState & Omit<Partial<ScenarioRun>, keyof RunState>;

/** A status the run never leaves (the server's list). */
function isFinal(status: string): boolean {
  return config().scenario_final_statuses.includes(status);
}

function wsUrl(path: string): string {
  const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${window.location.host}${path.startsWith("/") ? path : `/${path}`}`;
}

/** Whether the user may POST runs: true/false from OPTIONS, null if unknown. */
async function canStartRuns(host: PanelHost): Promise<boolean | null> {
  try {
    const response = await fetch(host.api.url("scenarios/"), {
      method: "OPTIONS",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    if (response.status === 401 || response.status === 403) return false;
    if (!response.ok) return null;
    const meta = (await response.json()) as { actions?: Record<string, unknown> };
    return Boolean(meta.actions && "POST" in meta.actions);
  } catch {
    return null;
  }
}

export function mountScenarios(el: HTMLElement, host: PanelHost, opts: ScenariosOptions = {}): ScenariosPanel {
  const runLimit = opts.runs ?? 20;
  const pollMs = opts.pollMs ?? 1000;
  el.classList.add("tw-panel", "tw-scenarios");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "scenarios-panel");

  // --- form --------------------------------------------------------------
  const kindSelect = h("select", { "data-testid": "scenario-kind", name: "kind" });
  const kindError = h("span", { class: "tw-field-error", "data-testid": "scenario-field-error-kind" });
  const description = h("p", { class: "tw-muted tw-kind-description" });
  const fieldsBox = h("div", { class: "tw-fields" });
  const submit = h("button", { type: "submit", class: "tw-btn primary", "data-testid": "scenario-submit" }, "Run");
  const refresh = h("input", { type: "checkbox", "data-testid": "scenario-refresh" });
  const permission = h("p", { class: "tw-note", "data-testid": "scenario-permission" });
  const errors = h("ul", { class: "tw-error tw-errors", "data-testid": "scenario-errors", role: "alert" });
  permission.hidden = true;
  errors.hidden = true;
  const form = h(
    "form",
    { class: "tw-form", "data-testid": "scenario-form", novalidate: "" },
    h("label", {}, h("span", {}, "Kind"), kindSelect, kindError),
    description,
    fieldsBox,
    h(
      "div",
      { class: "tw-actions" },
      submit,
      h(
        "label",
        { class: "tw-inline", title: "Recompute even if an earlier run had the result" },
        refresh,
        " recompute",
      ),
    ),
    permission,
    errors,
  );

  // --- the run shown ------------------------------------------------------
  const runTitle = h("h3", { "data-testid": "scenario-run-title" });
  const status = h("span", { class: "tw-status", "data-testid": "scenario-status" });
  const progress = h("progress", { max: "1", value: "0", "data-testid": "scenario-progress" });
  const message = h("p", { class: "tw-muted", "data-testid": "scenario-message" });
  const cancel = button("Cancel", { class: "tw-btn", "data-testid": "scenario-cancel" }, () => void cancelRun());
  const chartBox = h("div", { class: "tw-chart", "data-testid": "scenario-chart" });
  const tableBox = h("div", { class: "tw-table-box" });
  const trainingBox = h("div", { class: "tw-training", "data-testid": "training-result" });
  const runBox = h(
    "section",
    { class: "tw-run", "data-testid": "scenario-run-detail" },
    runTitle,
    h("div", { class: "tw-run-status" }, status, progress, cancel),
    message,
    chartBox,
    trainingBox,
    tableBox,
  );
  runBox.hidden = true;
  trainingBox.hidden = true;
  chartBox.hidden = true;

  // --- runs ----------------------------------------------------------------
  const runsList = h("ul", { class: "tw-runs", "data-testid": "scenario-runs" });
  const runsNote = h("p", { class: "tw-muted" });

  el.replaceChildren(
    h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Scenarios")),
    form,
    runBox,
    h("section", { class: "tw-section" }, h("h3", {}, "Runs"), runsNote, runsList),
  );

  let kinds: KindInfo[] = [];
  let inputs = new Map<string, FieldInput>();
  let allowed: boolean | null = null;
  let shown: ShownRun | null = null;
  let followGen = 0;
  let socket: WebSocket | null = null;
  let pollTimer: number | null = null;
  let plot: Pick<uPlot, "destroy"> | null = null;
  let training: TrainingView | null = null;
  let playback: Playback | null = null;
  let whatifFloor: { destroy(): void } | null = null;
  const extraPlots: uPlot[] = [];
  let resetGen = 0;

  const kindOf = (name: string) => kinds.find((k) => k.name === name);

  // ------------------------------------------------------------ the form
  function buildFields(kind: KindInfo | undefined): void {
    inputs = renderFields(kind, fieldsBox, description);
  }

  function clearErrors(): void {
    errors.replaceChildren();
    errors.hidden = true;
    kindError.textContent = "";
    for (const { input, error } of inputs.values()) {
      error.textContent = "";
      input.removeAttribute("aria-invalid");
    }
  }

  function showErrors(fields: Record<string, string[]>, general: string[]): void {
    const lines: string[] = [...general];
    for (const [name, msgs] of Object.entries(fields)) {
      const text = msgs.join(" ");
      const entry = inputs.get(name);
      if (name === "kind" && !entry) {
        kindError.textContent = text;
      } else if (entry) {
        entry.error.textContent = text;
        entry.input.setAttribute("aria-invalid", "true");
        const details = entry.input.closest("details");
        if (details) details.open = true;
      }
      lines.push(`${entry?.field.label ?? name}: ${text}`);
    }
    errors.replaceChildren(...lines.map((l) => h("li", {}, l)));
    errors.hidden = lines.length === 0;
  }

  function applyPermission(): void {
    permission.hidden = allowed !== false;
    permission.textContent = allowed === false ? PERMISSION_NOTE : "";
    submit.disabled = allowed === false || kinds.length === 0;
    form.dataset.allowed = allowed === null ? "unknown" : String(allowed);
  }

  /** `extra`: parameters the form cannot hold (a model given as a shape), sent as they are. */
  async function onSubmit(extra: Record<string, unknown> = {}): Promise<void> {
    clearErrors();
    const kind = kindOf(kindSelect.value);
    if (!kind) {
      showErrors({ kind: ["choose a kind"] }, []);
      return;
    }
    const raw: Record<string, RawValue> = {};
    for (const [name, { input }] of inputs) {
      raw[name] = rawValue(input);
    }
    const built = buildParams(kind, raw);
    Object.assign(built.params, extra);
    for (const name of Object.keys(extra)) delete built.errors[name];
    if (Object.keys(built.errors).length) {
      showErrors(built.errors, []);
      return;
    }
    submit.disabled = true;
    form.setAttribute("aria-busy", "true");
    // Forget the run shown so far: its status must not pass for the new one's.
    stopFollowing();
    clearResult();
    shown = null;
    runBox.hidden = true;
    status.textContent = "";
    delete runBox.dataset.runId;
    delete runBox.dataset.status;
    try {
      const body: Record<string, unknown> = { kind: kind.name, cluster: host.clusterId(), params: built.params };
      if (refresh.checked) body.refresh = true;
      const run = await host.api.post<ScenarioRun>("scenarios/", body);
      void loadRuns();
      await follow(run);
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        const mapped = mapErrors(error.body, [...inputs.keys(), "kind"]);
        showErrors(
          mapped.fields,
          mapped.general.length || Object.keys(mapped.fields).length ? mapped.general : [explain(error)],
        );
      } else if (error instanceof ApiError && error.status === 403) {
        allowed = false;
        applyPermission();
        showErrors({}, [PERMISSION_NOTE]);
      } else {
        showErrors({}, [explain(error)]);
      }
    } finally {
      form.removeAttribute("aria-busy");
      applyPermission();
    }
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void onSubmit();
  });
  /** "Open this configuration" of a search: the training form filled with it, then run. */
  async function openConfiguration(search: ShownRun, config: Config): Promise<void> {
    const kind = kindOf("training");
    if (!kind) return;
    const params = configurationParams(
      search.params,
      config,
      kind.fields.map((f) => f.name),
    );
    kindSelect.value = kind.name;
    clearErrors();
    buildFields(kind);
    const extra: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(params)) {
      const entry = inputs.get(name);
      const text = formValue(value);
      if (!entry) continue;
      if (entry.input instanceof HTMLInputElement && entry.input.type === "checkbox") {
        entry.input.checked = text === true;
        continue;
      }
      entry.input.value = String(text);
      if (entry.input.value !== String(text)) extra[name] = value; // not one of the select's options
    }
    form.scrollIntoView?.({ block: "nearest" });
    await onSubmit(extra);
  }

  kindSelect.addEventListener("change", () => {
    clearErrors();
    buildFields(kindOf(kindSelect.value));
  });

  // -------------------------------------------------------------- the run
  function stopFollowing(): void {
    followGen += 1;
    if (socket) {
      socket.onclose = null;
      socket.onmessage = null;
      socket.onerror = null;
      socket.close();
      socket = null;
    }
    if (pollTimer !== null) window.clearTimeout(pollTimer);
    pollTimer = null;
  }

  function showState(run: Partial<ShownRun> & { id: number }): void {
    shown = { ...(shown?.id === run.id ? shown : {}), ...run } as ShownRun;
    const r = shown;
    runBox.hidden = false;
    runBox.dataset.runId = String(r.id);
    runTitle.textContent = `Run #${r.id} · ${kindOf(r.kind)?.label ?? r.kind}${r.cached ? " (cached result)" : ""}`;
    status.textContent = r.status;
    status.className = `tw-status chip status-${r.status}`;
    runBox.dataset.status = r.status;
    const p = typeof r.progress === "number" ? Math.max(0, Math.min(1, r.progress)) : 0;
    progress.value = r.status === "succeeded" ? 1 : p;
    progress.dataset.value = String(progress.value);
    const text =
      r.status === "failed"
        ? `${r.error || r.message || "failed"}${r.error_field ? ` (${r.error_field})` : ""}`
        : r.message || "";
    message.textContent = text;
    message.classList.toggle("tw-error", r.status === "failed");
    cancel.hidden = isFinal(r.status);
    for (const li of runsList.querySelectorAll<HTMLElement>("li[data-run-id]")) {
      li.classList.toggle("selected", li.dataset.runId === String(r.id));
      if (li.dataset.runId === String(r.id) && li.dataset.status !== r.status) {
        li.dataset.status = r.status;
        const c = li.querySelector(".chip");
        if (c) {
          c.textContent = r.status;
          c.className = `chip status-${r.status}`;
        }
      }
    }
  }

  function clearResult(): void {
    playback?.destroy();
    playback = null;
    whatifFloor?.destroy();
    whatifFloor = null;
    plot?.destroy();
    plot = null;
    training?.destroy();
    training = null;
    trainingBox.hidden = true;
    for (const p of extraPlots.splice(0)) p.destroy();
    chartBox.replaceChildren();
    chartBox.hidden = true;
    delete chartBox.dataset.series;
    delete chartBox.dataset.points;
    tableBox.replaceChildren();
  }

  function showResult(run: ShownRun): void {
    clearResult();
    if (run.status !== "succeeded" || run.result === undefined || run.result === null) return;
    const kind = kindOf(run.kind);
    const data = chartData(run.result, kind?.chart);
    if (run.kind === "scheduling") {
      chartBox.hidden = false;
      extraPlots.push(...renderScheduling(chartBox, run.result));
    } else if ((plot = renderKindResult(run.kind, chartBox, run.result))) chartBox.hidden = false;
    else if (data) {
      chartBox.hidden = false;
      plot = renderChart(chartBox, data);
    }
    if (TRAINING_KINDS.has(run.kind)) {
      trainingBox.hidden = false;
      const onOpen = run.kind === "training_search" ? (c: Config) => void openConfiguration(run, c) : null;
      training = renderTrainingResult(trainingBox, run.kind, run.result, onOpen);
    }
    tableBox.replaceChildren(renderTable(resultTable(run.kind, run.result, run.rows)));
    if (run.kind === "whatif" && host.showDifference && run.cluster === host.clusterId()) {
      whatifFloor = mountWhatIfFloor(tableBox, run.result, host.showDifference.bind(host));
    }
    if (run.kind === "scheduling") {
      renderJobTable(tableBox, run.result);
      // The floor is this cluster's: play the placements back on it (not another cluster's).
      if (host.showPlayback && clusterOf(run.result) === host.clusterId()) {
        playback = mountPlayback(tableBox, run.result, host.showPlayback.bind(host));
      }
    }
  }

  async function finish(runId: number, gen: number, fromSocket?: ShownRun): Promise<void> {
    let run: ShownRun | undefined = fromSocket;
    try {
      // The detail may carry more than the socket's state (rows, inputs).
      run = await host.api.get<ScenarioRun>(`scenarios/${runId}/`);
    } catch (error) {
      if (!run) {
        if (gen === followGen) message.textContent = explain(error);
        return;
      }
    }
    if (gen !== followGen || !run) return;
    showState(run);
    showResult(run);
    void loadRuns();
  }

  function poll(runId: number, gen: number): void {
    const tick = async () => {
      if (gen !== followGen) return;
      try {
        const run = await host.api.get<ScenarioRun>(`scenarios/${runId}/`);
        if (gen !== followGen) return;
        showState(run);
        if (isFinal(run.status)) {
          showResult(run);
          void loadRuns();
          return;
        }
      } catch (error) {
        if (gen !== followGen) return;
        if (error instanceof ApiError && [401, 403, 404].includes(error.status)) {
          message.textContent = explain(error); // retrying cannot help
          return;
        }
        message.textContent = `${explain(error)} (retrying)`;
      }
      pollTimer = window.setTimeout(() => void tick(), pollMs);
    };
    pollTimer = window.setTimeout(() => void tick(), pollMs);
  }

  async function follow(run: ScenarioRun): Promise<void> {
    stopFollowing();
    const gen = followGen;
    clearResult();
    showState(run);
    if (isFinal(run.status)) {
      if (run.result === undefined) await finish(run.id, gen);
      else showResult(run);
      return;
    }
    let finalSeen = false;
    let ws: WebSocket;
    try {
      ws = new WebSocket(wsUrl(run.websocket ?? `/ws/scenarios/${run.id}/`));
    } catch {
      poll(run.id, gen);
      return;
    }
    socket = ws;
    runBox.dataset.transport = "websocket";
    ws.onmessage = (ev: MessageEvent) => {
      if (gen !== followGen) return;
      let msg: ScenarioMessage;
      try {
        msg = JSON.parse(String(ev.data)) as ScenarioMessage;
      } catch {
        return;
      }
      if (msg.type === "snapshot" || msg.type === "finished") {
        showState(msg.run);
        if (isFinal(msg.run.status) && !finalSeen) {
          finalSeen = true;
          ws.onclose = null;
          ws.close();
          if (socket === ws) socket = null;
          void finish(run.id, gen, msg.run);
        }
      } else if (msg.type === "progress") {
        showState({ id: run.id, status: msg.status, progress: msg.progress, message: msg.message });
      }
    };
    ws.onclose = () => {
      if (socket === ws) socket = null;
      if (gen !== followGen || finalSeen) return;
      runBox.dataset.transport = "polling";
      poll(run.id, gen);
    };
  }

  async function cancelRun(): Promise<void> {
    if (!shown) return;
    const id = shown.id;
    try {
      const run = await host.api.post<ScenarioRun>(`scenarios/${id}/cancel/`, {});
      if (shown?.id === id) showState(run);
    } catch (error) {
      message.textContent =
        error instanceof ApiError && error.status === 409 ? "It had already finished." : explain(error);
    }
  }

  // ------------------------------------------------------------- runs list
  async function loadRuns(): Promise<void> {
    const gen = resetGen;
    try {
      const page = await host.api.get<PaginatedScenarioRunList>(
        `scenarios/?cluster=${host.clusterId()}&ordering=-id&limit=${runLimit}`,
      );
      if (gen !== resetGen) return;
      runsNote.textContent = page.results.length ? "" : "No runs on this cluster yet.";
      runsList.replaceChildren(
        ...page.results.map((r) => {
          const li = h(
            "li",
            {
              "data-testid": "scenario-run",
              "data-run-id": String(r.id),
              "data-status": r.status,
              "data-kind": r.kind,
              tabindex: "0",
            },
            h("span", { class: "id" }, `#${r.id}`),
            h("span", { class: "kind" }, kindOf(r.kind)?.label ?? r.kind),
            chip(r.status),
            r.cached ? h("span", { class: "tw-badge" }, "cached") : null,
            h("span", { class: "when" }, formatAgo(r.created), r.duration_s ? ` · ${formatSeconds(r.duration_s)}` : ""),
          );
          if (shown?.id === r.id) li.classList.add("selected");
          li.addEventListener("click", () => void panel.open(r.id));
          li.addEventListener("keydown", (ev) => {
            if (ev.key === "Enter") void panel.open(r.id);
          });
          return li;
        }),
      );
    } catch (error) {
      if (gen !== resetGen) return;
      runsNote.textContent = `Could not load the runs: ${explain(error)}`;
    }
  }

  function prefill(name: string, texts: Readonly<Record<string, string>>): void {
    const kind = kindOf(name);
    if (!kind) {
      showErrors({}, [`This server has no scenario kind ${JSON.stringify(name)}.`]);
      return;
    }
    kindSelect.value = kind.name;
    clearErrors();
    buildFields(kind);
    for (const [field, text] of Object.entries(texts)) {
      const entry = inputs.get(field);
      if (entry) entry.input.value = text;
    }
    form.scrollIntoView?.({ block: "nearest" });
    kindSelect.focus();
  }

  const panel: ScenariosPanel = {
    prefill,
    async reset(): Promise<void> {
      const gen = ++resetGen;
      stopFollowing();
      clearResult();
      clearErrors();
      shown = null;
      runBox.hidden = true;
      el.setAttribute("aria-busy", "true");
      const [kindsR, allowedR] = await Promise.allSettled([
        kinds.length ? Promise.resolve(kinds) : host.api.get<ScenarioKind[]>("scenarios/kinds/"),
        canStartRuns(host),
      ]);
      if (gen !== resetGen) return;
      if (kindsR.status === "fulfilled") {
        const previous = kindSelect.value;
        kinds = kindsR.value;
        kindSelect.replaceChildren(...kinds.map((k) => h("option", { value: k.name }, k.label ?? k.name)));
        if (kinds.some((k) => k.name === previous)) kindSelect.value = previous;
        buildFields(kindOf(kindSelect.value));
      } else {
        showErrors({}, [`Could not load the scenario kinds: ${explain(kindsR.reason)}`]);
      }
      allowed = allowedR.status === "fulfilled" ? allowedR.value : null;
      applyPermission();
      await loadRuns();
      if (gen === resetGen) el.removeAttribute("aria-busy");
    },
    async open(runId: number): Promise<void> {
      stopFollowing();
      const gen = followGen;
      try {
        const run = await host.api.get<ScenarioRun>(`scenarios/${runId}/`);
        if (gen !== followGen) return;
        await follow(run);
      } catch (error) {
        if (gen !== followGen) return;
        clearResult();
        runBox.hidden = false;
        runTitle.textContent = `Run #${runId}`;
        message.textContent = explain(error);
      }
    },
  };
  return panel;
}
