import { describe, expect, it } from "vitest";

import { parseField } from "./scenarioform";
import {
  bestConfigs,
  bestTable,
  breakdownBar,
  configCards,
  configurationParams,
  dvfsFigure,
  executionSummary,
  formValue,
  memoryBar,
  opsBar,
  paretoScatter,
  precisionBars,
  rejectedRows,
} from "./training";

/** A `training` result as the kind returns it (figures rounded; keys as simulation.training's StepResult). */
const STEP = {
  step_time_s: 10,
  mfu: 0.5,
  hfu: 0.6,
  tokens_per_s: 13107.2,
  memory_gib_per_card: 60,
  memory: { weights: 10, gradients: 10, optimizer: 20, activations: 20, total: 60, hbm: 80 },
  fits: true,
  energy_j_per_step: 5e6,
  breakdown: { forward: 3, backward: 6, recompute: 0, tp_comm: 0.5, pp_bubble: 0.5 },
};

const EX = (tp: number, pp: number, dp: number, extra: Record<string, unknown> = {}) => ({
  tp,
  pp,
  dp,
  micro_batch: 1,
  global_batch: 64,
  precision: "bf16",
  recompute: "selective",
  zero: 1,
  sequence_parallel: true,
  ...extra,
});

const SEARCH = {
  configs_evaluated: 1200,
  configs_per_s: 50000,
  rejected: { "memory: activations": 300, "tp does not divide heads": 40, never: 0 },
  best: [
    { ...STEP, execution: EX(8, 8, 1), step_time_s: 9, energy_j_per_step: 4e6 },
    { ...STEP, execution: EX(4, 8, 2), step_time_s: 9.5, energy_j_per_step: 3.9e6 },
  ],
  pareto: [
    { ...STEP, execution: EX(8, 8, 1), step_time_s: 9, energy_j_per_step: 4e6 },
    { ...STEP, execution: EX(8, 4, 1), step_time_s: 12, energy_j_per_step: 2e6 },
    { ...STEP, execution: EX(8, 2, 1), step_time_s: 20, energy_j_per_step: 1.5e6 },
  ],
};

describe("breakdownBar", () => {
  it("stacks the non-zero parts with their shares", () => {
    const bar = breakdownBar(STEP);
    expect(bar?.total).toBe(10);
    expect(bar?.segments.map((s) => s.key)).toEqual(["forward", "backward", "tp_comm", "pp_bubble"]);
    expect(bar?.segments[1]).toMatchObject({ value: 6, share: 0.6, label: "backward" });
    expect(bar?.segments[2].label).toBe("TP/SP communication");
  });
  it("is null without a breakdown", () => {
    expect(breakdownBar({})).toBeNull();
    expect(breakdownBar({ breakdown: { forward: 0 } })).toBeNull();
    expect(breakdownBar(null)).toBeNull();
  });
});

describe("opsBar", () => {
  const OPS = {
    ...STEP,
    execution: { precision: "fp8" },
    ops: { gemm: 4, attention: 2, memory_bound: 1, casts: 0.5, kernel_gaps: 0, output_layer: 0.5, optimizer: 0.5 },
    exposed_comm: { tp: 0.5, cp: 0, ep: 0, pp: 0, dp: 0.5 },
    precisions: {
      bf16: { step_time_s: 13, speedup_over_bf16: 1, fits: true, ops: { gemm: 8, attention: 2 } },
      fp8: { step_time_s: 10, speedup_over_bf16: 1.3, fits: true, ops: { gemm: 4, attention: 2, casts: 0.5 } },
    },
  };
  it("stacks the op classes, the bubble and the exposed comm per dimension into the step", () => {
    const bar = opsBar(OPS);
    expect(bar?.segments.map((s) => s.key)).toEqual([
      "gemm",
      "attention",
      "memory_bound",
      "casts",
      "output_layer",
      "optimizer",
      "pp_bubble",
      "comm_tp",
      "comm_dp",
    ]);
    expect(bar?.total).toBe(10);
    expect(bar?.segments[7].label).toBe("TP comm (exposed)");
    expect(opsBar(STEP)).toBeNull();
  });
  it("compares the same layout per precision, the run's own marked", () => {
    const bars = precisionBars(OPS);
    expect(bars.map((b) => [b.precision, b.total, b.speedup, b.current])).toEqual([
      ["bf16", 13, 1, false],
      ["fp8", 10, 1.3, true],
    ]);
    expect(bars[1].segments.map((s) => s.key)).toEqual(["gemm", "attention", "casts"]);
    expect(precisionBars({ precisions: { bf16: OPS.precisions.bf16 } })).toEqual([]);
    expect(precisionBars(STEP)).toEqual([]);
  });
});

describe("memoryBar", () => {
  it("stacks the parts, not the totals, and compares with HBM", () => {
    const bar = memoryBar(STEP);
    expect(bar?.segments.map((s) => s.key)).toEqual(["weights", "gradients", "optimizer", "activations"]);
    expect(bar).toMatchObject({ total: 60, hbm: 80, fits: true, fill: 0.75 });
  });
  it("says when it does not fit", () => {
    const over = { ...STEP, fits: false, memory: { ...STEP.memory, activations: 50, total: 90 } };
    expect(memoryBar(over)).toMatchObject({ total: 90, fits: false, fill: 1.125 });
  });
});

describe("configurations", () => {
  it("ranks the best, counts cards as tp·pp·dp", () => {
    const best = bestConfigs(SEARCH);
    expect(best.map((c) => [c.rank, c.cards, c.stepTime])).toEqual([
      [1, 64, 9],
      [2, 64, 9.5],
    ]);
    expect(configCards({ cards: 128, execution: EX(8, 8, 1) })).toBe(128);
    expect(configCards({ execution: { tp: 8 } })).toBeNull();
  });
  it("summarises an execution in one line", () => {
    expect(executionSummary(EX(8, 8, 1))).toBe("TP 8 · PP 8 · DP 1 · mb 1 · bf16 · recompute selective · ZeRO 1 · SP");
    expect(executionSummary({ tp: 1, pp: 1, dp: 8, micro_batch: 2, ep: 1, recompute: "none" })).toBe(
      "TP 1 · PP 1 · DP 8 · mb 2",
    );
  });
  it("tabulates them", () => {
    const t = bestTable(bestConfigs(SEARCH));
    expect(t.columns[0]).toBe("#");
    expect(t.rows[0][0]).toBe("1");
    expect(t.rows[0][3]).toBe("50 %");
    expect(t.rows).toHaveLength(2);
  });
  it("sorts the rejected by count and drops zeros", () => {
    expect(rejectedRows(SEARCH)).toEqual([
      ["memory: activations", 300],
      ["tp does not divide heads", 40],
    ]);
    expect(rejectedRows({})).toEqual([]);
  });
});

describe("paretoScatter", () => {
  it("plots the front by ascending step time, one series per card count", () => {
    const withCards = {
      pareto: [
        { ...SEARCH.pareto[2], cards: 32 },
        { ...SEARCH.pareto[0], cards: 64 },
        { ...SEARCH.pareto[1], cards: 32 },
      ],
    };
    const s = paretoScatter(withCards);
    expect(s?.x).toEqual([9, 12, 20]);
    expect(s?.series.map((x) => x.label)).toEqual(["32 cards", "64 cards"]);
    expect(s?.series[0].y).toEqual([null, 2e6, 1.5e6]);
    expect(s?.series[1].y).toEqual([4e6, null, null]);
    expect(s?.points).toBe(3);
  });
  it("falls back to the best list, and is null with nothing to plot", () => {
    expect(paretoScatter({ best: SEARCH.best })?.points).toBe(2);
    expect(paretoScatter({ best: [], pareto: [] })).toBeNull();
  });
});

describe("configurationParams", () => {
  const FIELDS = ["model", "accelerator", "cluster", "cards", "tp", "pp", "dp", "global_batch", "micro_batch"];
  it("takes the search's hardware and the execution's fields the form knows", () => {
    const search = { model: "gpt3-175b", accelerator: "a100-sxm-80gb", cards: 64, global_batch: 64, top: 5 };
    const config = bestConfigs(SEARCH)[1];
    expect(configurationParams(search, config, FIELDS)).toEqual({
      model: "gpt3-175b",
      accelerator: "a100-sxm-80gb",
      cards: 64,
      global_batch: 64,
      tp: 4,
      pp: 8,
      dp: 2,
      micro_batch: 1,
    });
  });
  it("keeps a model given as a shape", () => {
    const shape = { layers: 2, hidden: 64, heads: 4, seq_len: 16, vocab: 100 };
    const p = configurationParams({ model: shape, global_batch: 8 }, bestConfigs(SEARCH)[0], FIELDS);
    expect(p.model).toEqual(shape);
  });
  it("writes values as the form's inputs take them", () => {
    expect(formValue(true)).toBe(true);
    expect(formValue(8)).toBe("8");
    expect(formValue([1, 2])).toBe("1, 2");
    expect(formValue({ a: 1 })).toBe('{"a":1}');
    expect(formValue(null)).toBe("");
  });
});

describe("the object field type", () => {
  const field = { name: "limits", type: "object", required: false };
  it("parses a JSON object", () => {
    expect(parseField(field, '{"tp": [1, 2]}')).toEqual({ ok: true, value: { tp: [1, 2] }, omit: false });
    expect(parseField(field, "")).toEqual({ ok: true, value: undefined, omit: true });
  });
  it("refuses what is not an object", () => {
    expect(parseField(field, "[1, 2]").ok).toBe(false);
    expect(parseField(field, "{tp: 1}").ok).toBe(false);
  });
});

describe("dvfsFigure", () => {
  const DVFS = {
    stages: 4,
    no_slowdown: { clocks: [0.9, 0.9, 0.9, 1], slowdown: 0, card_energy_saved_fraction: 0.05 },
    one_percent: { clocks: [0.85, 0.85, 0.85, 0.97], slowdown: 0.01, card_energy_saved_fraction: 0.09 },
  };

  it("gives both plans with their clocks, slowdown and energy saved", () => {
    const figure = dvfsFigure({ ...STEP, dvfs: DVFS });
    expect(figure?.stages).toBe(4);
    expect(figure?.plans.map((p) => [p.key, p.saved, p.slowdown])).toEqual([
      ["no_slowdown", 0.05, 0],
      ["one_percent", 0.09, 0.01],
    ]);
    expect(figure?.plans[1].clocks).toEqual([0.85, 0.85, 0.85, 0.97]);
  });

  it("is null without a pipeline or without figures", () => {
    expect(dvfsFigure(STEP)).toBeNull();
    expect(dvfsFigure({ dvfs: { stages: 1, no_slowdown: DVFS.no_slowdown } })).toBeNull();
    expect(dvfsFigure({ dvfs: { stages: 4, no_slowdown: { clocks: ["x"], slowdown: 0 } } })).toBeNull();
  });
});
