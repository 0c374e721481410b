/**
 * The jobs panel: the cluster's running and queued jobs (GET /api/jobs/?cluster=),
 * each with its placement quality and predicted AllReduce time; clicking a row
 * highlights that job's cards in the 3D view. The scene colours cards by job or by
 * tenant ("Job" / "Tenant" in the colour-by picker) from the cluster's allocations
 * (GET /api/clusters/<id>/allocations/): the pure functions below turn those
 * parallel arrays into a category per shown card.
 *
 *   const jobs = mountJobs(el, host);   // host.showAllocations (optional) receives the colouring
 *   await jobs.reset();                  // and again when the cluster changes
 */
import type { ClusterAllocations, Job, PaginatedJobList } from "../api";
import { button, explain, h } from "./dom";
import type { PanelHost } from "./host";

/** What the cards are coloured by, beside the live metrics. */
export type JobColouring = "job" | "tenant";
export const JOB_METRICS: ReadonlyArray<{ key: JobColouring; label: string; unit: string }> = [
  { key: "job", label: "Job", unit: "" },
  { key: "tenant", label: "Tenant", unit: "" },
];

/** Whether a colour-by key is the jobs' ("job" / "tenant") rather than a live metric. */
export function isJobColouring(key: string): key is JobColouring {
  return key === "job" || key === "tenant";
}

/** Categorical colours of jobs / tenants (cycled): distinct from the health and no-data colours. */
export const JOB_RGB: ReadonlyArray<readonly [number, number, number]> = [
  [0x4c, 0x8d, 0xff],
  [0xf7, 0x8c, 0x1f],
  [0x2e, 0xc4, 0xb6],
  [0xe8, 0x4a, 0x9b],
  [0xa3, 0x71, 0xf7],
  [0xc8, 0xd6, 0x2b],
  [0xff, 0xd1, 0x66],
  [0x00, 0xa8, 0xe8],
  [0xf2, 0x5f, 0x5c],
  [0x9b, 0xe5, 0x64],
];

/** Categories of a colouring: names (1-based codes: category k is names[k-1]) and per-card codes. */
export interface CardCategories {
  names: string[];
  /** card id → category (1-based). */
  byCard: Map<number, number>;
}

/**
 * Categories of the cards from a cluster's allocations. `by` "job": one per running
 * job (its name); "tenant": one per tenant. `only` keeps one job's cards (a highlight).
 * A card shared by several jobs takes the first one's category.
 */
export function cardCategories(
  alloc: Pick<ClusterAllocations, "card" | "job" | "jobs">,
  by: JobColouring,
  only: number | null = null,
): CardCategories {
  const jobs = new Map(alloc.jobs.map((j) => [Number(j["id"]), j]));
  const names: string[] = [];
  const index = new Map<string, number>();
  const byCard = new Map<number, number>();
  for (let i = 0; i < alloc.card.length; i++) {
    const jobId = alloc.job[i];
    if (only !== null && jobId !== only) continue;
    const job = jobs.get(jobId);
    const field = (key: string, fallback: string): string => {
      const v = job?.[key];
      return typeof v === "string" ? v : fallback;
    };
    const name = by === "job" ? `${field("name", String(jobId))} #${jobId}` : field("tenant", "?");
    let k = index.get(name);
    if (k === undefined) {
      names.push(name);
      k = names.length;
      index.set(name, k);
    }
    if (!byCard.has(alloc.card[i])) byCard.set(alloc.card[i], k);
  }
  return { names, byCard };
}

/** One value per shown instance (`keys`: card ids in view order): its category, or NaN. */
export function categoryValues(keys: ArrayLike<number>, cats: CardCategories): Float64Array {
  const out = new Float64Array(keys.length);
  for (let i = 0; i < keys.length; i++) out[i] = cats.byCard.get(keys[i]) ?? Number.NaN;
  return out;
}

/** The placement column: "2 servers · 1 supernode · rail-aligned" (or "—" / the share). */
export function placementText(job: Pick<Job, "placement" | "state" | "share_milli">): string {
  const q = job.placement;
  if (!q) return job.state === "queued" ? "waiting" : "—";
  const share = job.share_milli ?? 1000;
  if (share < 1000) return `${share} ‰ of a card`;
  const parts = [
    `${q.servers} server${q.servers === 1 ? "" : "s"}`,
    `${q.supernodes} supernode${q.supernodes === 1 ? "" : "s"}`,
  ];
  if (q.rail_aligned) parts.push("rail-aligned");
  else if (q.servers > 1) parts.push("not rail-aligned");
  return parts.join(" · ");
}

/** The AllReduce column: "4.99 ms (1.00× compact)" or why there is none. */
export function allreduceText(job: Pick<Job, "placement">): string {
  const q = job.placement;
  if (!q) return "—";
  if (q.allreduce_s === null || q.allreduce_s === undefined) return q.allreduce_note ? q.allreduce_note : "—";
  const ms = q.allreduce_s * 1e3;
  const ratio = q.vs_compact !== null && q.vs_compact !== undefined ? ` (${q.vs_compact.toFixed(2)}× compact)` : "";
  return `${ms < 10 ? ms.toFixed(2) : ms.toFixed(1)} ms${ratio}`;
}

export interface JobsPanel {
  /** Reload the cluster's jobs and allocations (on mount and when the cluster changes). */
  reset(): Promise<void>;
  /** The job whose cards are highlighted (null: none). */
  highlighted(): number | null;
}

/** What the panel hands the page: the allocations and the highlighted job. */
export interface JobsHost extends PanelHost {
  showAllocations?(alloc: ClusterAllocations | null, highlight: number | null): void;
}

export function mountJobs(el: HTMLElement, host: JobsHost): JobsPanel {
  const message = h("p", { class: "muted", "data-testid": "jobs-message" });
  const table = h("table", { class: "tw-table", "data-testid": "jobs-table" });
  let alloc: ClusterAllocations | null = null;
  let highlight: number | null = null;
  let gen = 0;
  el.replaceChildren(
    h(
      "div",
      { class: "panel-head" },
      h("h3", {}, "Jobs"),
      button("Refresh", { class: "small" }, () => void reset()),
    ),
    message,
    table,
  );

  function render(jobs: Job[]): void {
    const head = h(
      "tr",
      {},
      ...["Job", "Tenant", "Cards", "State", "Placement", "AllReduce"].map((c) => h("th", { scope: "col" }, c)),
    );
    const body = h("tbody");
    for (const job of jobs) {
      const tr = h(
        "tr",
        { "data-job": String(job.id), class: job.id === highlight ? "selected" : undefined, title: job.message },
        h("td", {}, job.name),
        h("td", {}, job.tenant),
        h("td", {}, (job.share_milli ?? 1000) < 1000 ? `${job.share_milli} ‰` : String(job.cards)),
        h("td", {}, h("span", { class: `chip status-${job.state}` }, job.state)),
        h("td", {}, placementText(job)),
        h("td", {}, allreduceText(job)),
      );
      tr.addEventListener("click", () => {
        highlight = highlight === job.id ? null : job.id;
        for (const row of body.querySelectorAll("tr"))
          row.classList.toggle("selected", row.dataset.job === String(highlight));
        host.showAllocations?.(alloc, highlight);
        const first = job.cards_held[0];
        if (highlight !== null && first !== undefined) void host.select({ kind: "card", id: first }, { fly: true });
      });
      body.append(tr);
    }
    table.replaceChildren(h("thead", {}, head), body);
    table.dataset.rows = String(jobs.length);
  }

  async function reset(): Promise<void> {
    const mine = ++gen;
    const cluster = host.clusterId();
    try {
      const [list, allocations] = await Promise.all([
        host.api.get<PaginatedJobList>(`jobs/?cluster=${cluster}&state=running&state=queued&limit=200`),
        host.api.get<ClusterAllocations>(`clusters/${cluster}/allocations/`),
      ]);
      if (mine !== gen) return;
      alloc = allocations;
      if (highlight !== null && !list.results.some((j) => j.id === highlight)) highlight = null;
      message.textContent = list.results.length ? "" : "No running or queued jobs on this cluster.";
      render(list.results);
      host.showAllocations?.(alloc, highlight);
    } catch (error) {
      if (mine === gen) message.textContent = explain(error);
    }
  }

  return { reset, highlighted: () => highlight };
}
