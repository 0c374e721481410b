"""Training-step model, best-configuration search and energy (see docs/simulation.md).

Quick tour (a doctest: ``pytest`` runs it)::

    >>> from simulation.training import MODELS, Execution, evaluate, system_for_accelerator
    >>> a100 = {"slug": "a100-sxm-80gb", "bf16_tflops": 312, "fp32_tflops": 19.5,
    ...         "tf32_tflops": 156, "hbm_gib": 80, "hbm_tbps": 2.039, "tdp_w": 400,
    ...         "idle_w": 55, "scaleup_gbps": 600}
    >>> system = system_for_accelerator(a100, 64)
    >>> ex = Execution(tp=8, pp=8, dp=1, global_batch=64, sequence_parallel=True,
    ...                recompute="selective", flash_attention=False)
    >>> r = evaluate(MODELS["gpt3-175b"], system, ex).to_dict()
    >>> r["fits"], 0.3 < r["mfu"] < 0.7
    (True, True)
"""

from .errors import TrainingInputError
from .execution import Execution, execution_from_params
from .fit import fits_anywhere, min_memory_gib
from .models import MODELS, ModelSpec, model_from_params
from .search import OBJECTIVES, SEARCH_LIMITS, SearchResult, search
from .step import StepResult, evaluate
from .system import SystemSpec, system_for_accelerator

__all__ = [
    "MODELS",
    "OBJECTIVES",
    "SEARCH_LIMITS",
    "Execution",
    "ModelSpec",
    "SearchResult",
    "StepResult",
    "SystemSpec",
    "TrainingInputError",
    "evaluate",
    "execution_from_params",
    "fits_anywhere",
    "min_memory_gib",
    "model_from_params",
    "search",
    "system_for_accelerator",
]
