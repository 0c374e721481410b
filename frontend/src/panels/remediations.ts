/**
 * The remediations panel: self-healing's audit trail for the cluster
 * (GET /api/jobs/remediations/?cluster=), newest first, kept current by the ws
 * `remediation` messages the page forwards to push() (twin.jobs.healing: proposed,
 * applied, rejected, failed). Each row says what failed and why, what was proposed
 * per job (spare card, re-route, or no spare) with the restart point and expected lost
 * work; a proposed one has Apply / Reject buttons (operators: the server answers 403
 * otherwise, shown in the row). A click on a row flies to the failed card.
 *
 *   const remediations = mountRemediations(el, host);
 *   await remediations.reset();            // and again when the cluster changes
 *   remediations.push(event, remediation); // on ws {"type": "remediation", …}
 */
import type { PaginatedRemediationList, Remediation } from "../api";
import { button, explain, h } from "./dom";
import { formatAgo } from "./format";
import type { PanelHost } from "./host";

export const DEFAULT_REMEDIATION_CAP = 100;

/** A remediation as the ws message carries it (twin.jobs.models.Remediation.as_event). */
export type RemediationPayload = Pick<
  Remediation,
  "id" | "card" | "cause" | "detail" | "state" | "message" | "detected_at" | "decided_at" | "applied_via"
> & {
  proposal: Proposal | Record<string, unknown>;
  applied_by?: string | null;
};

/** One job's part of a proposal (twin.jobs.healing.propose). */
export interface ProposalJob {
  job: number;
  name: string;
  /** "spare" | "reroute" | "none" */
  action: string;
  spare: { card: number; serial: string; server: number; slot: number; scope: string; rail_aligned: boolean } | null;
  restart_point: string;
  lost_work_s: number;
  restore_s: number;
  lost_card_hours: number;
  note?: string;
}
export interface Proposal {
  summary: string;
  jobs: ProposalJob[];
  applicable: boolean;
}

export const CAUSE_LABELS: Readonly<Record<string, string>> = {
  xid79: "XID 79: fallen off the bus",
  ecc: "Uncorrectable ECC",
  silent: "Silent (heartbeat lost)",
  link: "Network: slow links",
};

function proposalOf(r: Pick<RemediationPayload, "proposal">): Proposal {
  const p = r.proposal as Partial<Proposal> | null;
  return { summary: String(p?.summary ?? ""), jobs: Array.isArray(p?.jobs) ? p.jobs : [], applicable: !!p?.applicable };
}

/** Newest first (by id: rows are written in detection order); later payloads of an id win; capped. */
export function mergeRemediations(
  list: ReadonlyArray<RemediationPayload>,
  incoming: ReadonlyArray<RemediationPayload>,
  cap = DEFAULT_REMEDIATION_CAP,
): RemediationPayload[] {
  const byId = new Map<number, RemediationPayload>(list.map((r) => [r.id, r]));
  for (const r of incoming) {
    if (!r || typeof r.id !== "number") continue;
    byId.set(r.id, { ...byId.get(r.id), ...r });
  }
  return [...byId.values()].sort((a, b) => b.id - a.id).slice(0, Math.max(0, cap));
}

/** "12 s", "4.5 min", "2.0 h": a duration for lost work and restore times. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "—";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** One line per job of the proposal: what happens to it and what it costs. */
export function describeJobs(r: Pick<RemediationPayload, "proposal">): string[] {
  return proposalOf(r).jobs.map((j) => {
    const who = `${j.name} #${j.job}`;
    if (j.action === "reroute") return `${who}: re-routed, no restart`;
    const cost = `restart from ${j.restart_point}, loses ${formatDuration(j.lost_work_s)} + ${formatDuration(j.restore_s)} restore`;
    if (j.action === "spare" && j.spare) {
      const where =
        j.spare.scope === "server" ? "same server" : `same supernode${j.spare.rail_aligned ? ", same rail" : ""}`;
      return `${who} → card ${j.spare.serial} (${where}); ${cost}`;
    }
    return `${who}: no spare${j.note ? ` (${j.note})` : ""}; ${cost}`;
  });
}

/** Counts per state, for the header. */
export function stateCounts(list: ReadonlyArray<Pick<RemediationPayload, "state">>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of list) out[r.state] = (out[r.state] ?? 0) + 1;
  return out;
}

export interface RemediationsPanel {
  reset(): Promise<void>;
  push(event: string, remediation: RemediationPayload): void;
}

export function mountRemediations(el: HTMLElement, host: PanelHost, cap = DEFAULT_REMEDIATION_CAP): RemediationsPanel {
  el.classList.add("tw-panel", "tw-remediations-panel");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "remediations-panel");
  const counts = h("span", { class: "tw-counts", "data-testid": "remediations-count" });
  const list = h("ul", { class: "tw-alert-list", "data-testid": "remediations-list" });
  const status = h("p", { class: "tw-muted" });
  const reload = button(
    "↻",
    { class: "tw-icon", title: "Reload remediations", "aria-label": "Reload remediations" },
    () => void panel.reset(),
  );
  el.replaceChildren(
    h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Self-healing"), counts, reload),
    status,
    list,
  );
  let items: RemediationPayload[] = [];
  let generation = 0;
  const errors = new Map<number, string>();

  async function decide(r: RemediationPayload, how: "apply" | "reject"): Promise<void> {
    try {
      const out = await host.api.post<Remediation>(`jobs/remediations/${r.id}/${how}/`, {});
      errors.delete(r.id);
      items = mergeRemediations(items, [out as unknown as RemediationPayload], cap);
    } catch (error) {
      errors.set(r.id, explain(error));
    }
    render();
  }

  function render(): void {
    const c = stateCounts(items);
    counts.replaceChildren(
      ...(["proposed", "applied", "failed", "rejected"] as const)
        .filter((s) => c[s])
        .map((s) => h("span", { class: `sev-badge rem-${s}` }, `${c[s]} ${s}`)),
    );
    const now = Date.now();
    const rows = items.map((r) => {
      const p = proposalOf(r);
      const li = h(
        "li",
        {
          "data-testid": "remediation-item",
          class: `rem-${r.state} clickable`,
          "data-remediation-id": String(r.id),
          "data-card": String(r.card),
          "data-state": r.state,
          "data-cause": r.cause,
          title: "Show the card",
        },
        h("span", { class: "sev" }, r.state),
        h("span", { class: "msg" }, `card ${r.card}: ${CAUSE_LABELS[r.cause] ?? r.cause} — ${r.message || p.summary}`),
        h("span", { class: "when" }, formatAgo(r.detected_at, now), r.applied_via ? ` · ${r.applied_via}` : ""),
        ...describeJobs(r).map((line) => h("span", { class: "tw-muted rem-job" }, line)),
      );
      if (r.state === "proposed") {
        li.append(
          button(
            "Apply",
            { class: "tw-small", "data-testid": "remediation-apply", disabled: p.applicable ? undefined : "" },
            (ev) => {
              ev.stopPropagation();
              void decide(r, "apply");
            },
          ),
          button("Reject", { class: "tw-small", "data-testid": "remediation-reject" }, (ev) => {
            ev.stopPropagation();
            void decide(r, "reject");
          }),
        );
      }
      const err = errors.get(r.id);
      if (err) li.append(h("span", { class: "tw-error" }, err));
      li.addEventListener("click", () => void host.select({ kind: "card", id: r.card }, { fly: true }));
      return li;
    });
    if (rows.length === 0) rows.push(h("li", { class: "none" }, "No failed cards."));
    list.replaceChildren(...rows);
  }

  const panel: RemediationsPanel = {
    async reset(): Promise<void> {
      const gen = ++generation;
      try {
        const page = await host.api.get<PaginatedRemediationList>(
          `jobs/remediations/?cluster=${host.clusterId()}&limit=${cap}`,
        );
        if (gen !== generation) return;
        items = mergeRemediations([], page.results as unknown as RemediationPayload[], cap);
        status.textContent = "";
      } catch (error) {
        if (gen !== generation) return;
        status.textContent = `Could not load the remediations: ${explain(error)}`;
      }
      render();
    },
    push(_event: string, remediation: RemediationPayload): void {
      items = mergeRemediations(items, [remediation], cap);
      render();
    },
  };
  render();
  return panel;
}
