"""Failure processes per component class, calibrated on a published large run.

Every class of component fails as a Poisson process of rate ``λ_c`` per unit and
hour; a job on a cluster with ``n_c`` units of class ``c`` is interrupted at rate

    Λ = Σ_c λ_c · n_c                     (superposition of independent Poisson processes)

so its mean time between interruptions is ``MTBI = 1/Λ`` and the count in ``T``
hours is Poisson(Λ·T). Scaling a cluster scales the unit counts
(:func:`component_counts`), not the rates: a 2× bigger job sees 2× the card and
host failures and a little more than 2× the switch failures (one more fat-tree
tier).

Calibration. Meta's Llama 3 405B pre-training (Dubey et al., "The Llama 3 Herd
of Models", 2024, §3.3.4, Table 5) logged 419 unexpected interruptions in a
54-day snapshot on 16,384 H100 80 GB GPUs. :data:`LLAMA3_TABLE5` copies the
table's rows (cause, count); each row is assigned to one component class and the
per-unit rate is ``count / (units × 54 × 24 h)`` with the units counted on that
cluster (:func:`calibrate`). The table's percentages are of 419 for every row
but the first: "Faulty GPU" is printed as 148 (30.1 %), but 148/419 = 35.3 %;
the counts sum to 419, so the counts are used.

The table joins "network switch/cable" (35) in one row; this model splits it
between switches and cables in proportion :data:`SWITCH_SHARE_OF_NETWORK`
(0.5, an assumption: no public split for that run), which only matters when a
cluster's ratio of cables to switches differs from the calibration cluster's.

Detection time per kind (:data:`DETECTION_S`), the time from the fault to the
job knowing it:

* ``xid`` — the GPU driver's Xid event (Xid 48/63/64 uncorrectable ECC, 79
  "fallen off the bus") read by the node agent (DCGM health watches poll every
  few seconds): 10 s.
* ``link_down`` — a port or cable going down raises an RDMA async event at
  once; NCCL turns it into an error on the next operation: 5 s.
* ``heartbeat`` — a host that stops answering is declared dead after missed
  heartbeats (Kubernetes' ``node-monitor-grace-period``, 40 s by default).
* ``process_exit`` — a crash (software bug) ends the process; the launcher
  sees the exit code: 2 s.
* ``watchdog`` — a hang (NCCL watchdog timeouts) is seen only when the
  collective's timeout expires: PyTorch's ``ProcessGroupNCCL`` default is
  10 min (600 s).

Example (the calibration cluster reproduces its own count, by construction):

    >>> counts = component_counts(16_384)
    >>> classes = calibrate()
    >>> round(sum(expected_interruptions(classes, counts, 54 * 24).values()))
    419
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "CALIBRATION_CARDS",
    "CALIBRATION_HOURS",
    "CLASSES",
    "DETECTION_S",
    "FailureClass",
    "LLAMA3_TABLE5",
    "SWITCH_SHARE_OF_NETWORK",
    "calibrate",
    "component_counts",
    "expected_interruptions",
    "interruption_rate_per_h",
]

CALIBRATION_CARDS = 16_384
"""Llama 3 405B: 16,384 H100 80 GB (Dubey et al. 2024, §3.3)."""
CALIBRATION_HOURS = 54 * 24.0
"""The 54-day snapshot of Table 5."""
SWITCH_SHARE_OF_NETWORK = 0.5
"""Share of Table 5's "network switch/cable" row given to switches (assumption)."""

LLAMA3_TABLE5: tuple[tuple[str, str, int], ...] = (
    # (cause as printed, component class, interruptions)
    ("Faulty GPU", "card", 148),
    ("GPU HBM3 Memory", "hbm", 72),
    ("Software Bug", "software", 54),
    ("Network Switch/Cable", "network", 35),
    ("Host Maintenance", "host", 32),
    ("GPU SRAM Memory", "card", 19),
    ("GPU System Processor", "card", 17),
    ("NIC", "nic", 7),
    ("NCCL Watchdog Timeouts", "other", 7),
    ("Silent Data Corruption", "card", 6),
    ("GPU Thermal Interface + Sensor", "card", 6),
    ("SSD", "host", 3),
    ("Power Supply", "host", 3),
    ("Server Chassis", "host", 2),
    ("IO Expansion Board", "host", 2),
    ("Dependency", "software", 2),
    ("CPU", "host", 2),
    ("System Memory", "host", 2),
)
"""Dubey et al. 2024, "The Llama 3 Herd of Models", Table 5 (unexpected interruptions)."""

DETECTION_S: dict[str, float] = {
    "xid": 10.0,
    "link_down": 5.0,
    "heartbeat": 40.0,
    "process_exit": 2.0,
    "watchdog": 600.0,
}
"""Seconds from fault to detection per kind (see the module docstring for sources)."""


@dataclass(frozen=True)
class FailureClass:
    """One class of component: what a unit is, how often one fails, how it is seen,
    and what it takes to fix."""

    name: str
    label: str
    unit: str  #: what ``component_counts`` counts ("cards", "hbm_stacks", "servers", ...)
    rate_per_unit_h: float  #: λ_c, failures per unit and hour
    detection: str  #: a key of :data:`DETECTION_S`
    needs_spare: bool  #: the job needs a replacement server before it can run at full size
    repair_h: float  #: time to bring the unit back (RMA swap, reboot, re-cable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Class → (label, unit, detection, needs a spare server, repair hours). Repair times
# are typical operator figures (assumptions, documented in docs/simulation.md): a
# card or HBM fault means a node drained for an RMA swap (~3 days), a host fault a
# reboot or part swap (~1 day), network parts a re-cable or switch swap (hours).
_CLASS_FACTS: dict[str, tuple[str, str, str, bool, float]] = {
    "card": ("GPU / card", "cards", "xid", True, 72.0),
    "hbm": ("HBM", "hbm_stacks", "xid", True, 72.0),
    "nic": ("NIC", "nics", "link_down", True, 24.0),
    "switch": ("Network switch", "switches", "link_down", False, 4.0),
    "cable": ("Cable / transceiver", "links", "link_down", False, 2.0),
    "host": ("Host (CPU, memory, PSU, SSD, board)", "servers", "heartbeat", True, 24.0),
    "software": ("Software bug", "cards", "process_exit", False, 0.0),
    "other": ("Hang / unknown (NCCL watchdog)", "cards", "watchdog", False, 0.0),
}
CLASSES: tuple[str, ...] = tuple(_CLASS_FACTS)


def component_counts(cards: int, *, cards_per_server: int = 8, hbm_stacks_per_card: int = 5,
                     nics_per_card: float = 1.0, switch_radix: int = 64) -> dict[str, int]:
    """Units of each kind in a cluster of ``cards`` accelerators.

    Servers hold ``cards_per_server`` cards (DGX/HGX H100: 8); each H100 carries 5
    active HBM3 stacks (80 GB = 5 × 16 GB, NVIDIA H100 datasheet); one 400G NIC per
    card (the rail-optimised DGX SuperPOD design). Switches and links are those of a
    non-blocking fat tree of radix ``k`` over the NICs: with ``n`` NICs, a leaf has
    k/2 down and k/2 up ports; tiers are added until one switch's k ports cover the
    level below (Al-Fares et al., SIGCOMM 2008: a 3-tier fat tree of k-port switches
    serves k³/4 hosts with 5k²/4 switches). With ``T`` the least number of tiers such
    that n ≤ 2·(k/2)^T:

        switches = (T−1)·⌈n/(k/2)⌉ + ⌈n/k⌉,    links = T·n

    (every tier carries the n NIC bandwidths up; the NIC–leaf cables are links).

    >>> c = component_counts(16_384)
    >>> (c["servers"], c["hbm_stacks"], c["nics"], c["switches"], c["links"])
    (2048, 81920, 16384, 1280, 49152)
    """
    if cards < 1:
        raise ValueError("cards must be at least 1")
    nics = max(1, math.ceil(cards * nics_per_card))
    half = max(1, switch_radix // 2)
    tiers = 1
    while nics > 2 * half ** tiers:
        tiers += 1
    # every tier below the top: ⌈n/(k/2)⌉ switches; the top uses all k ports: ⌈n/k⌉
    switches = (tiers - 1) * math.ceil(nics / half) + math.ceil(nics / switch_radix)
    links = tiers * nics  # NIC→leaf cables plus each lower tier's n uplinks
    return {
        "cards": cards,
        "hbm_stacks": cards * hbm_stacks_per_card,
        "servers": math.ceil(cards / cards_per_server),
        "nics": nics,
        "switches": switches,
        "links": links,
    }


def calibrate(table: tuple[tuple[str, str, int], ...] = LLAMA3_TABLE5, *,
              cards: int = CALIBRATION_CARDS, hours: float = CALIBRATION_HOURS,
              switch_share: float = SWITCH_SHARE_OF_NETWORK) -> dict[str, FailureClass]:
    """Per-unit rates from a published interruption table: ``λ_c = count_c / (n_c · T)``.

    Source: Dubey et al. 2024, Table 5 (the default ``table``). The "network" row is
    split between switches and cables by ``switch_share``.
    """
    counts = component_counts(cards)
    per_class: dict[str, float] = dict.fromkeys(CLASSES, 0.0)
    for _, cls, n in table:
        if cls == "network":
            per_class["switch"] += n * switch_share
            per_class["cable"] += n * (1.0 - switch_share)
        else:
            per_class[cls] += n
    out: dict[str, FailureClass] = {}
    for name, (label, unit, detection, spare, repair_h) in _CLASS_FACTS.items():
        rate = per_class[name] / (counts[unit] * hours)
        out[name] = FailureClass(name, label, unit, rate, detection, spare, repair_h)
    return out


def expected_interruptions(classes: Mapping[str, FailureClass], counts: Mapping[str, int],
                           hours: float) -> dict[str, float]:
    """Expected interruptions per class in ``hours``: ``λ_c · n_c · T`` (Poisson mean)."""
    return {name: c.rate_per_unit_h * counts[c.unit] * hours for name, c in classes.items()}


def interruption_rate_per_h(classes: Mapping[str, FailureClass],
                            counts: Mapping[str, int]) -> float:
    """Λ = Σ λ_c · n_c, interruptions per hour of the whole job (its MTBI is 1/Λ)."""
    return sum(c.rate_per_unit_h * counts[c.unit] for c in classes.values())
