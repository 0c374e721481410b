"""What if, from now: a live snapshot moved forward over a horizon with events,
side by side with doing nothing (``docs/whatif.md``).

:mod:`.events` (the events, the horizon, the options), :mod:`.layout` (the cluster's
servers, cards, racks and switches), :mod:`.engine` (:func:`run_whatif`: the
scheduling replay with failures, self-healing, caps and power), :mod:`.speed` (a
training job's pace from the training model's step time), :mod:`.facility`
(the plant's engine for the facility events and PUE).
"""
from .engine import CaseResult, WhatIfResult, draw_failures, run_case, run_whatif, summary_rows
from .events import (
    EVENT_KINDS,
    FACILITY_KINDS,
    MAX_EVENTS,
    MAX_HORIZON_S,
    MIN_HORIZON_S,
    Event,
    WhatIfInputError,
    WhatIfSpec,
)
from .layout import DEFAULT_CLOCK_POWER, Layout
from .speed import Shape, StepTimes

__all__ = [
    "DEFAULT_CLOCK_POWER",
    "EVENT_KINDS",
    "FACILITY_KINDS",
    "MAX_EVENTS",
    "MAX_HORIZON_S",
    "MIN_HORIZON_S",
    "CaseResult",
    "Event",
    "Layout",
    "Shape",
    "StepTimes",
    "WhatIfInputError",
    "WhatIfResult",
    "WhatIfSpec",
    "draw_failures",
    "run_case",
    "run_whatif",
    "summary_rows",
]
