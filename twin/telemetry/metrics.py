"""The telemetry metric set: one fixed, ordered list every layer agrees on.

Why a fixed order: the live state is *columnar* (one float32 array per metric,
one slot per card), so a metric is known everywhere by its position
(``METRIC_INDEX[key]``) and a batch of many cards travels as arrays, never as
one object per sample. Append new metrics at the end; never reorder (stored
1-minute history rows are float32 vectors in this order, see ``models``).

Each metric carries:

* ``unit`` and a **valid range** ``[lo, hi]``: a reading outside it is absurd
  (a sensor glitch, a unit mix-up, a negative counter) and is rejected with a
  reason instead of being stored;
* the **DCGM field** it maps from (``dcgm``) and the factor that converts the
  exporter's unit to ours (``dcgm_scale``): DCGM reports framebuffer in MiB
  (we keep GiB), profiling ratios in 0–1 (we keep %), PCIe in bytes/s (we keep
  GB/s) and NVLink total in MB/s (DCGM field 449 is an instantaneous rate
  although dcgm-exporter types it ``counter``);
* ``source``: ``card`` metrics come from the accelerator (DCGM), ``host`` ones
  from the node agent (CPU, storage, checkpoint) and ``fabric`` ones from
  network probes (link and RDMA latency, P2P, AllReduce). All are stored per
  card: host and fabric readings are what the card experiences.

The seeds ask for "20+ core metrics: FLOPs utilization, Tensor Core
utilization, AllReduce latency, P2P bandwidth, CPU utilization, memory
bandwidth, storage throughput, checkpoint write latency", plus link latency,
RDMA latency, power, temperature, HBM use and errors: all are here.

DCGM's "blank" sentinels (``DCGM_INT64_BLANK`` = 0x7ffffffffffffff0 and the
three codes above it — not found, **not supported** = 9223372036854775794, not
permissioned — and the int32/fp64 equivalents) mean "no value": the parsers
drop them (``is_dcgm_blank``) instead of rejecting them as absurd.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DCGM_FIELDS",
    "DCGM_INT32_BLANK",
    "DCGM_INT64_BLANK",
    "DCGM_NOT_SUPPORTED",
    "HISTORY_METRICS",
    "LO",
    "HI",
    "METRICS",
    "METRIC_INDEX",
    "METRIC_KEYS",
    "N_METRICS",
    "Metric",
    "is_dcgm_blank",
    "metric",
    "validate_value",
]


@dataclass(frozen=True)
class Metric:
    """One telemetry metric. ``index`` is its fixed column in the state."""

    index: int
    key: str
    label: str
    unit: str
    lo: float
    hi: float
    dcgm: tuple[str, ...] = ()
    dcgm_scale: float = 1.0
    source: str = "card"
    description: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "key": self.key, "label": self.label, "unit": self.unit,
                "min": self.lo, "max": self.hi, "dcgm": list(self.dcgm),
                "dcgm_scale": self.dcgm_scale, "source": self.source,
                "description": self.description}


_DEFS: list[tuple] = [
    # key, label, unit, lo, hi, dcgm fields, scale, source, description
    ("gpu_util", "GPU utilization", "%", 0, 100, ("DCGM_FI_DEV_GPU_UTIL",), 1.0, "card",
     "Time a kernel was running (nvidia-smi's utilization)."),
    ("flops_util", "FLOPs utilization", "%", 0, 100, ("DCGM_FI_PROF_SM_ACTIVE",), 100.0,
     "card", "SM activity, the DCGM proxy of achieved FLOP/s over peak."),
    ("tensor_active", "Tensor Core utilization", "%", 0, 100,
     ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",), 100.0, "card",
     "Cycles the tensor (HMMA) pipe is active."),
    ("gr_engine_active", "Graphics engine active", "%", 0, 100,
     ("DCGM_FI_PROF_GR_ENGINE_ACTIVE",), 100.0, "card",
     "Time the graphics/compute engine is active."),
    ("dram_active", "Memory bandwidth utilization", "%", 0, 100,
     ("DCGM_FI_PROF_DRAM_ACTIVE",), 100.0, "card",
     "Cycles the HBM interface is busy: memory bandwidth used over peak."),
    ("power_w", "Power draw", "W", 0, 2000, ("DCGM_FI_DEV_POWER_USAGE",), 1.0, "card",
     "Board power; rolled up per rack against its 40 kW budget."),
    ("gpu_temp_c", "GPU temperature", "°C", -20, 130, ("DCGM_FI_DEV_GPU_TEMP",), 1.0, "card",
     "Die temperature."),
    ("mem_temp_c", "HBM temperature", "°C", -20, 130, ("DCGM_FI_DEV_MEMORY_TEMP",), 1.0,
     "card", "Memory (HBM) temperature."),
    ("hbm_used_gib", "HBM used", "GiB", 0, 1024, ("DCGM_FI_DEV_FB_USED",), 1 / 1024, "card",
     "Framebuffer used (DCGM reports MiB)."),
    ("hbm_free_gib", "HBM free", "GiB", 0, 1024, ("DCGM_FI_DEV_FB_FREE",), 1 / 1024, "card",
     "Framebuffer free (DCGM reports MiB)."),
    ("sm_clock_mhz", "SM clock", "MHz", 0, 5000, ("DCGM_FI_DEV_SM_CLOCK",), 1.0, "card",
     "Streaming-multiprocessor clock; drops under DVFS capping."),
    ("mem_clock_mhz", "Memory clock", "MHz", 0, 20000, ("DCGM_FI_DEV_MEM_CLOCK",), 1.0, "card",
     "HBM clock."),
    ("xid_errors", "Last XID error", "code", 0, 1000, ("DCGM_FI_DEV_XID_ERRORS",), 1.0, "card",
     "Code of the last XID error (0: none)."),
    ("ecc_errors", "ECC errors (DBE)", "count", 0, 1e9,
     ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",), 1.0, "card",
     "Uncorrectable (double-bit) volatile ECC errors since the last reset."),
    ("nvlink_gbps", "NVLink bandwidth", "GB/s", 0, 10000,
     ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",), 1e-3, "card",
     "Scale-up traffic over all lanes (DCGM field 449 is a rate in MB/s)."),
    ("pcie_tx_gbps", "PCIe TX", "GB/s", 0, 1000,
     ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_DEV_PCIE_TX_BYTES"), 1e-9, "card",
     "PCIe transmit rate including protocol headers (DCGM reports bytes/s)."),
    ("pcie_rx_gbps", "PCIe RX", "GB/s", 0, 1000,
     ("DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_DEV_PCIE_RX_BYTES"), 1e-9, "card",
     "PCIe receive rate including protocol headers (DCGM reports bytes/s)."),
    ("pcie_replay", "PCIe replays", "count", 0, 1e12, ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER",), 1.0,
     "card", "PCIe retries since boot: a rising count means a bad lane or riser."),
    ("allreduce_latency_us", "AllReduce latency", "µs", 0, 1e8, (), 1.0, "fabric",
     "Latency of the job's last AllReduce as its communicator reports it."),
    ("p2p_gbps", "P2P bandwidth", "GB/s", 0, 10000, (), 1.0, "fabric",
     "Measured card-to-card bandwidth."),
    ("cpu_util", "CPU utilization", "%", 0, 100, (), 1.0, "host",
     "Host CPU busy share of the card's server."),
    ("storage_gbps", "Storage throughput", "GB/s", 0, 10000, (), 1.0, "host",
     "Read + write throughput of the server's NVMe and distributed file system."),
    ("checkpoint_write_s", "Checkpoint write latency", "s", 0, 86400, (), 1.0, "host",
     "Duration of the last checkpoint write (seeds: ≤ 15 s)."),
    ("link_latency_ns", "Link latency", "ns", 0, 1e6, (), 1.0, "fabric",
     "Card-to-card latency inside the supernode (seeds: < 200 ns, other design < 500 ns)."),
    ("rdma_latency_us", "RDMA latency", "µs", 0, 1e6, (), 1.0, "fabric",
     "RDMA round trip over the RoCE/InfiniBand network (seeds: < 2 µs)."),
    ("energy_kj", "Energy since boot", "kJ", 0, 1e12,
     ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), 1e-6, "card",
     "Board energy since the driver loaded (DCGM reports mJ)."),
]

METRICS: tuple[Metric, ...] = tuple(
    Metric(i, key, label, unit, float(lo), float(hi), dcgm, float(scale), source, desc)
    for i, (key, label, unit, lo, hi, dcgm, scale, source, desc) in enumerate(_DEFS)
)
N_METRICS = len(METRICS)
METRIC_KEYS: tuple[str, ...] = tuple(m.key for m in METRICS)
METRIC_INDEX: dict[str, int] = {m.key: m.index for m in METRICS}
# DCGM field name -> (metric index, factor from the exporter's unit to ours).
DCGM_FIELDS: dict[str, tuple[int, float]] = {
    field: (m.index, m.dcgm_scale) for m in METRICS for field in m.dcgm
}
# Valid ranges as arrays, for vectorised validation of columnar batches.
LO = np.array([m.lo for m in METRICS], dtype=np.float64)
HI = np.array([m.hi for m in METRICS], dtype=np.float64)
# Metrics kept in the short per-card history (sparklines); the rest are latest-only.
HISTORY_METRICS: tuple[str, ...] = ("gpu_util", "power_w", "gpu_temp_c", "hbm_used_gib",
                                    "tensor_active", "nvlink_gbps")

DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0  # 9223372036854775792
DCGM_NOT_SUPPORTED = DCGM_INT64_BLANK + 2  # 9223372036854775794
DCGM_INT32_BLANK = 0x7FFFFFF0  # 2147483632
DCGM_FP64_BLANK = 140737488355328.0


def is_dcgm_blank(value: float) -> bool:
    """True for DCGM's "no value" sentinels (blank, not found, not supported,
    not permissioned) in their int64, int32 and fp64 forms. Compared as floats
    because the exposition prints them as decimal integers we parse as floats.
    Infinities are not sentinels (``+Inf`` is a reading to reject as infinite)."""
    return math.isfinite(value) and (value >= 9.2233720368547758e18
                                     or DCGM_INT32_BLANK <= value <= DCGM_INT32_BLANK + 3
                                     or DCGM_FP64_BLANK <= value <= DCGM_FP64_BLANK + 3)


def metric(key: str) -> Metric:
    """The metric called ``key``; ``KeyError`` naming the known ones otherwise."""
    try:
        return METRICS[METRIC_INDEX[key]]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; known: {', '.join(METRIC_KEYS)}") from None


def validate_value(index: int, value: object) -> str | None:
    """Why ``value`` is not a valid reading of metric ``index`` (None if it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = f"a {type(value).__name__}" if isinstance(value, (list, dict)) else repr(value)
        return f"not a number: {text if len(text) <= 40 else text[:39] + '…'}"
    try:
        v = float(value)
    except OverflowError:  # an integer past the float range (±1.8e308)
        return f"{'above' if value > 0 else 'below'} the valid range (an integer of " \
               f"{value.bit_length()} bits)"
    if v != v:
        return "NaN is not a reading"
    m = METRICS[index]
    if v in (float("inf"), float("-inf")):
        return "infinite value"
    if v < m.lo:
        return ("negative value" if v < 0 <= m.lo
                else f"below the valid range ({v:g} < {m.lo:g} {m.unit})")
    if v > m.hi:
        return f"above the valid range ({v:g} > {m.hi:g} {m.unit})"
    return None
