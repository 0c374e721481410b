"""Resilience of a training job: failures, checkpoints on tiered storage, recovery, spares.

Pure (numpy, scipy, SimPy). Modules: :mod:`.failures` (per-class Poisson rates
calibrated on Llama 3's Table 5, detection per kind), :mod:`.checkpoint` (size
from the model and its sharding, time per tier, sync/async, peer replication),
:mod:`.closed_forms` (Young, Daly, the M/G/∞ spare pool), :mod:`.events` (the
SimPy job/failure/spare processes), :mod:`.params` (validated inputs),
:mod:`.study` (:func:`simulate_resilience`), :mod:`.replays` (published runs).
"""
from .checkpoint import (
    ADAM_MIXED_BYTES,
    DGX_H100_TIERS,
    CheckpointSize,
    CheckpointTimes,
    StorageTier,
    checkpoint_size,
    checkpoint_times,
    claim_check,
    tier_time_s,
)
from .closed_forms import (
    daly_ettr,
    daly_interval_s,
    first_order_ettr,
    full_size_availability,
    spares_for,
    young_interval_s,
)
from .failures import (
    CLASSES,
    DETECTION_S,
    LLAMA3_TABLE5,
    FailureClass,
    calibrate,
    component_counts,
    expected_interruptions,
    interruption_rate_per_h,
)
from .params import (
    CheckpointPolicy,
    Recovery,
    ResilienceInputError,
    ResilienceParams,
    resilience_from_params,
)
from .study import ResilienceResult, job_plan, simulate_resilience

__all__ = [
    "ADAM_MIXED_BYTES",
    "CLASSES",
    "DETECTION_S",
    "DGX_H100_TIERS",
    "LLAMA3_TABLE5",
    "CheckpointPolicy",
    "CheckpointSize",
    "CheckpointTimes",
    "FailureClass",
    "Recovery",
    "ResilienceInputError",
    "ResilienceParams",
    "ResilienceResult",
    "StorageTier",
    "calibrate",
    "checkpoint_size",
    "checkpoint_times",
    "claim_check",
    "component_counts",
    "daly_ettr",
    "daly_interval_s",
    "expected_interruptions",
    "first_order_ettr",
    "full_size_availability",
    "interruption_rate_per_h",
    "job_plan",
    "resilience_from_params",
    "simulate_resilience",
    "spares_for",
    "tier_time_s",
    "young_interval_s",
]
