/**
 * A `scheduling` run's per-job table: each policy's bounded table (the server keeps
 * the first and last tasks started and the slowest, and says so in `shown`) in one
 * HTML table with a policy column, sorted by clicking a column header (again: the
 * other way). Empty cells (a task still running, a one-card task's AllReduce) sort last.
 */
import { h } from "./dom";
import { formatNumber } from "./format";

export interface JobRow {
  policy: string;
  job: string;
  size: number;
  queued_s: number | null;
  start_s: number | null;
  end_s: number | null;
  jct_s: number | null;
  nodes: number;
  allreduce_s: number | null;
  slowest?: boolean;
}

export type JobKey = Exclude<keyof JobRow, "slowest">;

export const JOB_COLUMNS: ReadonlyArray<{ key: JobKey; label: string }> = [
  { key: "policy", label: "Policy" },
  { key: "job", label: "Job" },
  { key: "size", label: "Cards" },
  { key: "queued_s", label: "Queued (s)" },
  { key: "start_s", label: "Start (s)" },
  { key: "end_s", label: "End (s)" },
  { key: "jct_s", label: "JCT (s)" },
  { key: "nodes", label: "Nodes" },
  { key: "allreduce_s", label: "AllReduce (ms)" },
];

interface PolicyTable {
  policy: string;
  job_table?: { rows?: Omit<JobRow, "policy">[]; total?: number; shown?: string };
}

function tablesOf(result: unknown): PolicyTable[] {
  if (typeof result !== "object" || result === null) return [];
  const list = (result as { policies?: unknown }).policies;
  return Array.isArray(list) ? (list as PolicyTable[]).filter((p) => p && p.job_table) : [];
}

/** Every policy's rows, with the policy named in each. */
export function jobRows(result: unknown): JobRow[] {
  return tablesOf(result).flatMap((p) => (p.job_table?.rows ?? []).map((r) => ({ ...r, policy: p.policy })));
}

/** What each policy's table holds ("fgd: 75 of 2,000 tasks: …"). */
export function jobTableNotes(result: unknown): string[] {
  return tablesOf(result).map((p) => `${p.policy}: ${p.job_table?.shown ?? ""}`);
}

/** `rows` sorted by `key` (numbers numerically, text by locale), empty cells last either way. */
export function sortRows(rows: readonly JobRow[], key: JobKey, descending = false): JobRow[] {
  const sign = descending ? -1 : 1;
  return [...rows].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    if (x === null || x === undefined) return y === null || y === undefined ? 0 : 1;
    if (y === null || y === undefined) return -1;
    if (typeof x === "number" && typeof y === "number") return sign * (x - y);
    return sign * String(x).localeCompare(String(y));
  });
}

/** A cell's text. */
export function cellText(row: JobRow, key: JobKey): string {
  const v = row[key];
  if (v === null || v === undefined) return "—";
  if (key === "allreduce_s") return formatNumber((v as number) * 1e3, 3);
  if (typeof v === "number") return formatNumber(v, 4);
  return v;
}

/** The sortable table into `container` (nothing when the result has no job table). */
export function renderJobTable(container: HTMLElement, result: unknown): HTMLTableElement | null {
  const rows = jobRows(result);
  if (rows.length === 0) return null;
  let key: JobKey = "policy";
  let descending = false;
  const table = h("table", { class: "tw-table tw-sortable", "data-testid": "scheduling-jobs" });
  const head = h("tr");
  const body = h("tbody");
  const draw = () => {
    head.replaceChildren(
      ...JOB_COLUMNS.map((c) => {
        const th = h("th", { scope: "col", "data-key": c.key }, c.label);
        if (c.key === key) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        th.addEventListener("click", () => {
          descending = c.key === key ? !descending : c.key !== "policy" && c.key !== "job";
          key = c.key;
          draw();
        });
        return th;
      }),
    );
    body.replaceChildren(
      ...sortRows(rows, key, descending).map((r) => {
        const tr = h("tr", {}, ...JOB_COLUMNS.map((c) => h("td", {}, cellText(r, c.key))));
        if (r.slowest) tr.classList.add("slowest");
        return tr;
      }),
    );
    table.dataset.sort = `${key}:${descending ? "desc" : "asc"}`;
  };
  table.append(h("thead", {}, head), body);
  draw();
  const notes = h("p", { class: "tw-help" }, jobTableNotes(result).join(" · "));
  container.append(h("h4", {}, "Jobs"), notes, table);
  return table;
}
