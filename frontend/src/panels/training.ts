/**
 * The results of the `training` and `training_search` scenario kinds as plain data
 * (pure, vitest-covered); trainingrender.ts draws them.
 *
 * - a step-time breakdown: the parts of one step (forward, backward, recompute,
 *   TP communication, pipeline bubble, …) in seconds, as one stacked bar;
 * - memory per card (weights, gradients, optimizer states, activations) against
 *   the card's HBM;
 * - the Pareto front of a search (step time against energy per step, one series
 *   per card count);
 * - the ranked best configurations, each with the parameters that open it as a
 *   `training` run ("open this configuration");
 * - per-stage clocks (DVFS) of a pipeline: the clock each stage can run at with no
 *   slowdown and with at most 1 %, and the cards' energy each plan saves;
 * - the step by class of op (GEMM, attention, memory-bound, FP8 casts, …), the
 *   pipeline bubble and the exposed communication per parallel dimension, as one
 *   stacked bar; and the same layout at each GEMM precision the card offers (BF16
 *   against FP8 / FP4), one bar each on a common scale.
 *
 * Shapes are the kinds' results (twin/scenarios/kinds/training.py):
 * `training` = the library's StepResult + `model`, `system`, `execution`;
 * `training_search` = its SearchResult (`best`, `pareto`, `rejected`, …).
 */
import { formatNumber, formatSeconds } from "./format";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

export const TRAINING_KINDS: ReadonlySet<string> = new Set(["training", "training_search"]);

/** One segment of a stacked bar. */
export interface Segment {
  key: string;
  label: string;
  value: number;
  /** Share of the bar's total, 0…1. */
  share: number;
}

export interface StackedBar {
  segments: Segment[];
  total: number;
}

/** Readable names of the breakdown and memory parts (others: the key with spaces). */
const PART_LABELS: Readonly<Record<string, string>> = {
  forward: "forward",
  backward: "backward",
  recompute: "recompute",
  tp_comm: "TP/SP communication",
  pp_bubble: "pipeline bubble",
  pp_p2p: "PP point-to-point",
  dp_exposed: "DP communication (exposed)",
  ep_exposed: "EP communication (exposed)",
  optimizer: "optimizer",
  compression: "compression",
  gemm: "GEMMs",
  attention: "attention",
  memory_bound: "memory-bound ops",
  casts: "FP8/FP4 casts",
  kernel_gaps: "kernel launch gaps",
  output_layer: "output layer + loss",
  comm_tp: "TP comm (exposed)",
  comm_cp: "CP comm (exposed)",
  comm_ep: "EP comm (exposed)",
  comm_pp: "PP comm (exposed)",
  comm_dp: "DP comm (exposed)",
  weights: "weights",
  gradients: "gradients",
  optimizer_states: "optimizer states",
  activations: "activations",
};

export function partLabel(key: string): string {
  return PART_LABELS[key] ?? key.replaceAll("_", " ");
}

function stacked(entries: [string, number][]): StackedBar {
  const kept = entries.filter(([, v]) => v > 0);
  const total = kept.reduce((s, [, v]) => s + v, 0);
  return {
    segments: kept.map(([key, value]) => ({ key, label: partLabel(key), value, share: total > 0 ? value / total : 0 })),
    total,
  };
}

/** The step-time breakdown (`breakdown`: part → seconds) as a stacked bar, zero parts left out. */
export function breakdownBar(result: unknown): StackedBar | null {
  if (!isObj(result) || !isObj(result.breakdown)) return null;
  const entries: [string, number][] = [];
  for (const [key, value] of Object.entries(result.breakdown)) {
    const v = num(value);
    if (v !== null) entries.push([key, v]);
  }
  const bar = stacked(entries);
  return bar.segments.length ? bar : null;
}

const OP_CLASSES = ["gemm", "attention", "memory_bound", "casts", "kernel_gaps", "output_layer", "optimizer"];
const COMM_DIMS = ["tp", "cp", "ep", "pp", "dp"];

function opEntries(ops: Obj, comm: Obj | null, breakdown: Obj | null): [string, number][] {
  const entries: [string, number][] = [];
  for (const key of OP_CLASSES) {
    const v = num(ops[key]);
    if (v !== null) entries.push([key, v]);
  }
  const bubble = breakdown ? num(breakdown.pp_bubble) : null;
  if (bubble !== null) entries.push(["pp_bubble", bubble]);
  if (comm) {
    for (const dim of COMM_DIMS) {
      const v = num(comm[dim]);
      if (v !== null) entries.push([`comm_${dim}`, v]);
    }
  }
  const compression = breakdown ? num(breakdown.compression) : null;
  if (compression !== null) entries.push(["compression", compression]);
  return entries;
}

/**
 * The step by class of op (`ops`: the critical stage's busy seconds per class), the
 * pipeline bubble and the exposed communication per dimension (`exposed_comm`), zero
 * parts left out: together they make the step time.
 */
export function opsBar(result: unknown): StackedBar | null {
  if (!isObj(result) || !isObj(result.ops)) return null;
  const bar = stacked(
    opEntries(
      result.ops,
      isObj(result.exposed_comm) ? result.exposed_comm : null,
      isObj(result.breakdown) ? result.breakdown : null,
    ),
  );
  return bar.segments.length ? bar : null;
}

/** One GEMM precision of `precisions`: its bar of op classes and its speed-up over BF16. */
export interface PrecisionBar extends StackedBar {
  precision: string;
  speedup: number | null;
  fits: boolean;
  current: boolean;
}

/**
 * The same layout at each GEMM precision the card offers (`precisions`, BF16 first),
 * each a stacked bar of its op classes; `current` marks the run's own precision.
 */
export function precisionBars(result: unknown): PrecisionBar[] {
  if (!isObj(result) || !isObj(result.precisions)) return [];
  const own =
    isObj(result.execution) && typeof result.execution.precision === "string" ? result.execution.precision : null;
  const out: PrecisionBar[] = [];
  for (const [precision, entry] of Object.entries(result.precisions)) {
    if (!isObj(entry) || !isObj(entry.ops)) continue;
    const bar = stacked(opEntries(entry.ops, null, null));
    const step = num(entry.step_time_s);
    out.push({
      ...bar,
      total: step ?? bar.total,
      precision,
      speedup: num(entry.speedup_over_bf16),
      fits: entry.fits !== false,
      current: precision === own,
    });
  }
  return out.length > 1 ? out : [];
}

/** Memory per card: the parts of `memory` (GiB) stacked, and the card's HBM to compare with. */
export interface MemoryBar extends StackedBar {
  hbm: number | null;
  fits: boolean;
  /** total / HBM (1 = full), null without an HBM figure. */
  fill: number | null;
}

const MEMORY_TOTALS = new Set(["total", "hbm", "free", "capacity"]);

export function memoryBar(result: unknown): MemoryBar | null {
  if (!isObj(result) || !isObj(result.memory)) return null;
  const memory = result.memory;
  const entries: [string, number][] = [];
  for (const [key, value] of Object.entries(memory)) {
    const v = num(value);
    if (v !== null && !MEMORY_TOTALS.has(key)) entries.push([key, v]);
  }
  const bar = stacked(entries);
  if (!bar.segments.length) return null;
  const total = num(memory.total) ?? bar.total;
  const hbm = num(memory.hbm);
  const fits = typeof result.fits === "boolean" ? result.fits : hbm === null || total <= hbm;
  return { ...bar, total, hbm, fits, fill: hbm ? total / hbm : null };
}

/** One plan of per-stage clocks (`dvfs.no_slowdown`, `dvfs.one_percent`). */
export interface ClockPlan {
  key: string;
  label: string;
  /** Clock of each pipeline stage, as a fraction of the base clock (0…1]. */
  clocks: number[];
  /** Step-time slowdown the plan costs, 0…1. */
  slowdown: number;
  /** Share of the cards' energy per step it saves, 0…1. */
  saved: number;
}

export interface DvfsFigure {
  stages: number;
  plans: ClockPlan[];
}

const DVFS_PLANS: readonly [string, string][] = [
  ["no_slowdown", "no slowdown"],
  ["one_percent", "≤ 1 % slowdown"],
];

/**
 * The per-stage clock plans of a `training` result (`dvfs`, from
 * simulation/training/step.py), or null without a pipeline to plan (one stage).
 */
export function dvfsFigure(result: unknown): DvfsFigure | null {
  if (!isObj(result) || !isObj(result.dvfs)) return null;
  const stages = num(result.dvfs.stages);
  if (stages === null || stages < 2) return null;
  const plans: ClockPlan[] = [];
  for (const [key, label] of DVFS_PLANS) {
    const plan = result.dvfs[key];
    if (!isObj(plan) || !Array.isArray(plan.clocks)) continue;
    const clocks = plan.clocks.map(num);
    const slowdown = num(plan.slowdown);
    const saved = num(plan.card_energy_saved_fraction);
    if (clocks.some((c) => c === null) || slowdown === null || saved === null) continue;
    plans.push({ key, label, clocks: clocks as number[], slowdown, saved });
  }
  return plans.length ? { stages, plans } : null;
}

/** A configuration of a search (an entry of `best` or `pareto`). */
export interface Config {
  rank: number;
  execution: Obj;
  stepTime: number | null;
  energy: number | null;
  mfu: number | null;
  tokensPerS: number | null;
  memory: number | null;
  cards: number | null;
  raw: Obj;
}

/** Cards of an execution: tp·pp·dp(·1), or the entry's own `cards`. */
export function configCards(entry: Obj): number | null {
  const own = num(entry.cards);
  if (own !== null) return own;
  const ex = isObj(entry.execution) ? entry.execution : {};
  const own2 = num(ex.cards);
  if (own2 !== null) return own2;
  const tp = num(ex.tp);
  const pp = num(ex.pp);
  const dp = num(ex.dp);
  return tp !== null && pp !== null && dp !== null ? tp * pp * dp : null;
}

function configs(list: unknown): Config[] {
  if (!Array.isArray(list)) return [];
  return list.filter(isObj).map((entry, i) => ({
    rank: i + 1,
    execution: isObj(entry.execution) ? entry.execution : {},
    stepTime: num(entry.step_time_s),
    energy: num(entry.energy_j_per_step),
    mfu: num(entry.mfu),
    tokensPerS: num(entry.tokens_per_s),
    memory: num(entry.memory_gib_per_card),
    cards: configCards(entry),
    raw: entry,
  }));
}

/** The ranked best configurations of a search. */
export function bestConfigs(result: unknown): Config[] {
  return isObj(result) ? configs(result.best) : [];
}

/** Parallelism of an execution in one line: "TP 8 · PP 8 · DP 1 · mb 1 · bf16 · selective". */
export function executionSummary(ex: Obj): string {
  const parts: string[] = [];
  for (const [key, label] of [
    ["tp", "TP"],
    ["pp", "PP"],
    ["dp", "DP"],
    ["ep", "EP"],
    ["vpp", "VPP"],
    ["micro_batch", "mb"],
  ] as const) {
    const v = num(ex[key]);
    if (v !== null && (v !== 1 || key === "tp" || key === "pp" || key === "dp" || key === "micro_batch"))
      parts.push(`${label} ${v}`);
  }
  if (typeof ex.precision === "string") parts.push(ex.precision);
  if (typeof ex.recompute === "string" && ex.recompute !== "none") parts.push(`recompute ${ex.recompute}`);
  const zero = num(ex.zero);
  if (zero) parts.push(`ZeRO ${zero}`);
  if (ex.sequence_parallel === true) parts.push("SP");
  return parts.join(" · ");
}

export interface BestTable {
  columns: string[];
  rows: string[][];
}

/** The best-configurations table (rank, parallelism, step time, MFU, tokens/s, memory, energy). */
export function bestTable(list: Config[]): BestTable {
  return {
    columns: ["#", "configuration", "step time", "MFU", "tokens/s", "GiB/card", "J/step"],
    rows: list.map((c) => [
      String(c.rank),
      executionSummary(c.execution),
      formatSeconds(c.stepTime),
      c.mfu === null ? "—" : `${formatNumber(c.mfu * 100, 3)} %`,
      formatNumber(c.tokensPerS, 4),
      formatNumber(c.memory, 3),
      formatNumber(c.energy, 4),
    ]),
  };
}

/** The Pareto front as scatter series: one per card count, x = step time (s), y = energy (J/step). */
export interface Scatter {
  /** Step times, ascending (uPlot's x). */
  x: number[];
  series: { label: string; cards: number | null; y: (number | null)[] }[];
  points: number;
}

export function paretoScatter(result: unknown): Scatter | null {
  if (!isObj(result)) return null;
  const list = configs(Array.isArray(result.pareto) && result.pareto.length ? result.pareto : result.best);
  const usable = list.filter((c) => c.stepTime !== null && c.energy !== null);
  if (!usable.length) return null;
  usable.sort((a, b) => (a.stepTime ?? 0) - (b.stepTime ?? 0));
  const byCards = new Map<number | null, number>();
  for (const c of usable) if (!byCards.has(c.cards)) byCards.set(c.cards, byCards.size);
  const keys = [...byCards.keys()].sort((a, b) => (a ?? 0) - (b ?? 0));
  const series = keys.map((cards) => ({
    label: cards === null ? "configurations" : `${formatNumber(cards, 6)} cards`,
    cards,
    y: usable.map((c) => (c.cards === cards ? c.energy : null)),
  }));
  return { x: usable.map((c) => c.stepTime ?? 0), series, points: usable.length };
}

/** `rejected` (reason → count) as rows sorted by count, largest first. */
export function rejectedRows(result: unknown): [string, number][] {
  if (!isObj(result) || !isObj(result.rejected)) return [];
  return Object.entries(result.rejected)
    .map(([reason, n]): [string, number] => [reason, num(n) ?? 0])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}

/** The parameters of the search a configuration belongs to that a `training` run shares. */
const SHARED = ["model", "accelerator", "cluster", "cards", "global_batch"];

/**
 * The `training` parameters that reproduce configuration `config` of a search run
 * with parameters `searchParams`: the search's model, hardware, cards and global
 * batch, plus the execution's fields that the `training` form knows
 * (`fieldNames`, from GET /api/scenarios/kinds/); nulls are left out (defaults).
 */
export function configurationParams(
  searchParams: unknown,
  config: Config,
  fieldNames: ReadonlyArray<string>,
): Record<string, unknown> {
  const known = new Set(fieldNames);
  const out: Record<string, unknown> = {};
  const from = isObj(searchParams) ? searchParams : {};
  for (const key of SHARED) {
    if (from[key] !== undefined && from[key] !== null && known.has(key)) out[key] = from[key];
  }
  for (const [key, value] of Object.entries(config.execution)) {
    if (known.has(key) && value !== null && value !== undefined && !SHARED.includes(key)) out[key] = value;
  }
  if (config.cards !== null && known.has("cards")) out.cards = config.cards;
  const gb = num(config.execution.global_batch);
  if (gb !== null && known.has("global_batch")) out.global_batch = gb;
  return out;
}

/**
 * A parameter value as the text the form's input takes (scenarioform.ts parses it
 * back): booleans stay booleans (checkboxes), lists comma-separated, objects JSON.
 */
export function formValue(value: unknown): string | boolean {
  if (typeof value === "boolean") return value;
  if (Array.isArray(value)) return value.map((v) => String(v)).join(", ");
  if (typeof value === "string") return value;
  if (typeof value === "number") return String(value);
  return value === null || value === undefined ? "" : JSON.stringify(value);
}
