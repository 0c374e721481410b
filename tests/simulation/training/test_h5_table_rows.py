"""Rows of the Hopper / Blackwell validation table checked against their sources (h5)."""

from __future__ import annotations

import statistics

from simulation.training.validation import DROPLESS_REGRESSION, MODERN_RUNS, validation_table

TABLE = validation_table()


def test_the_rows_their_publisher_calls_a_regression_are_marked_and_kept() -> None:
    """Megatron-Bridge issue 1998: Qwen3 30B-A3B on H100 and B200 is "2X slower" in 25.11
    (dropless) than in 25.09 (token-drop). The two rows carry the statement and the 25.09
    figure of the same layout (H100 10,494, B200 18,066 tokens/s/GPU: 1.99× and 1.94× the
    25.11 ones); they stay in the table and in its means."""
    marked = [r for r in MODERN_RUNS if r.regression]
    assert {(r.model, r.accelerator, r.release) for r in marked} == {
        ("qwen3-30b-a3b", "h100-sxm5-80gb", "25.11"), ("qwen3-30b-a3b", "b200-sxm-180gb", "25.11")}
    before = {"h100-sxm5-80gb": 10494, "b200-sxm-180gb": 18066}
    for r in marked:
        assert r.regression == DROPLESS_REGRESSION.format(before=before[r.accelerator])
        assert 1.9 < before[r.accelerator] / r.tokens_per_gpu < 2.0  # "2X slower"
    rows = [t for t in TABLE if t["regression"]]
    assert len(rows) == 2 and len(TABLE) == 56
    # they are the two worst-predicted MoE rows but for one (GPT-OSS on B200 at EP 8)
    moe = sorted((t for t in TABLE if t["moe"]), key=lambda t: -abs(t["error"]))
    assert {t["run"] for t in moe[:4]} >= {t["run"] for t in rows}
    rest = [abs(t["error"]) for t in TABLE if not t["regression"]]
    assert statistics.mean(rest) < statistics.mean(abs(t["error"]) for t in TABLE)
