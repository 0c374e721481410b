"""The metric set and the Prometheus text parser, without Redis or a database."""
from __future__ import annotations

import math

import pytest

from twin.telemetry.metrics import (
    DCGM_FIELDS,
    DCGM_NOT_SUPPORTED,
    METRIC_INDEX,
    METRIC_KEYS,
    METRICS,
    is_dcgm_blank,
    metric,
    validate_value,
)
from twin.telemetry.prometheus import parse_exposition

ISSUE_DCGM_FIELDS = [
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
]


def test_the_metric_set_covers_the_seeds_monitoring_metrics():
    assert len(METRICS) >= 20
    for key in ("flops_util", "tensor_active", "allreduce_latency_us", "p2p_gbps", "cpu_util",
                "dram_active", "storage_gbps", "checkpoint_write_s", "link_latency_ns",
                "rdma_latency_us", "power_w", "gpu_temp_c", "hbm_used_gib", "xid_errors",
                "ecc_errors"):
        assert key in METRIC_INDEX, key
    assert [m.index for m in METRICS] == list(range(len(METRICS)))
    assert len(set(METRIC_KEYS)) == len(METRIC_KEYS)
    for m in METRICS:
        assert m.unit and m.lo < m.hi, m


def test_every_dcgm_field_of_the_issue_is_mapped_with_its_unit_conversion():
    for field in ISSUE_DCGM_FIELDS:
        assert field in DCGM_FIELDS, field
    idx, scale = DCGM_FIELDS["DCGM_FI_DEV_FB_USED"]
    assert METRIC_KEYS[idx] == "hbm_used_gib" and 81920 * scale == pytest.approx(80.0)
    idx, scale = DCGM_FIELDS["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    assert METRIC_KEYS[idx] == "tensor_active" and 0.5 * scale == pytest.approx(50.0)
    idx, scale = DCGM_FIELDS["DCGM_FI_PROF_PCIE_TX_BYTES"]
    assert METRIC_KEYS[idx] == "pcie_tx_gbps" and 25e9 * scale == pytest.approx(25.0)
    idx, scale = DCGM_FIELDS["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"]
    assert METRIC_KEYS[idx] == "nvlink_gbps" and 450_000 * scale == pytest.approx(450.0)


def test_dcgm_blank_values_are_recognised():
    assert is_dcgm_blank(float(DCGM_NOT_SUPPORTED))
    assert is_dcgm_blank(float(9223372036854775792))
    assert is_dcgm_blank(2147483632.0)
    assert not is_dcgm_blank(700.0)


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("gpu_util", -1, "negative value"),
    ("gpu_util", 101, "above the valid range"),
    ("power_w", 1e7, "above the valid range"),
    ("gpu_temp_c", float("nan"), "NaN is not a reading"),
    ("gpu_temp_c", float("inf"), "infinite value"),
    ("gpu_temp_c", "hot", "not a number"),
    ("gpu_temp_c", True, "not a number"),
])
def test_values_are_checked_against_each_metric_range(key, value, reason):
    problem = validate_value(METRIC_INDEX[key], value)
    assert problem and reason in problem


def test_valid_values_pass():
    assert validate_value(METRIC_INDEX["gpu_temp_c"], -5) is None
    assert validate_value(METRIC_INDEX["power_w"], 699.5) is None
    with pytest.raises(KeyError, match="known"):
        metric("temperature")


def test_the_parser_reads_labels_escapes_special_values_and_timestamps():
    text = (
        '# HELP x a help line with "quotes"\n'
        '# TYPE x gauge\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="a\\"b\\\\c\\nd",UUID="GPU-1",} 71 1718000000123\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0"} NaN\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="1"} +Inf\n'
        'up 1\n'
        '\n'
    )
    samples, broken, n_broken = parse_exposition(text)
    assert n_broken == 0 and broken == []
    assert [s.name for s in samples] == ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                                         "DCGM_FI_DEV_POWER_USAGE", "up"]
    first = samples[0]
    assert first.labels == {"gpu": "0", "Hostname": 'a"b\\c\nd', "UUID": "GPU-1"}
    assert first.value == 71 and first.timestamp_ms == 1718000000123 and first.line == 3
    assert math.isnan(samples[1].value) and samples[2].value == math.inf
    assert samples[3].labels == {}


def test_broken_lines_are_reported_and_the_rest_kept():
    text = (
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1"} 70\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-2" 70\n'  # unterminated labels
        'DCGM_FI_DEV_GPU_TEMP{gpu="2"} seventy\n'  # value not a number
        '{gpu="3"} 5\n'  # no metric name
        'DCGM_FI_DEV_GPU_TEMP{gpu=4} 5\n'  # unquoted label value
        'DCGM_FI_DEV_GPU_TEMP{gpu="5"} 5 12 extra\n'  # trailing text
        'DCGM_FI_DEV_GPU_TEMP{gpu="6"} 5 noon\n'  # bad timestamp
        'DCGM_FI_DEV_GPU_TEMP{gpu="7",UUID="GPU-8"} 72\n'
    )
    samples, broken, n_broken = parse_exposition(text)
    assert [s.labels.get("gpu") for s in samples] == ["0", "7"]
    assert n_broken == 6
    assert [b["line"] for b in broken] == [2, 3, 4, 5, 6, 7]
    assert all(b["reason"] and b["text"] for b in broken)
