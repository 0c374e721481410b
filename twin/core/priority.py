"""A worker's CPU priority (``TWIN_WORKER_NICE``): the live tick ahead of the readers.

Why: on one machine the telemetry worker (it applies the agents' batches and runs
the live tick) shares the cores with the web processes. A tick costs ~10 ms of CPU
but, under a crowd of readers, waited for a core for up to half a second
(``docs/benchmarks.md``, "serving"). The web already runs at nice 10
(``TWIN_WEB_NICE``); that does not help against what else runs at nice 0 — the
database and Redis serving those readers, the load generator, other tenants of the
host. A negative nice for the telemetry worker does: under Linux's CFS a runnable
task of weight w gets w / Σw of a contended core (weights: nice 0 = 1,024, nice −5
= 3,121, nice 10 = 110; ``sched_prio_to_weight`` in ``kernel/sched/core.c``) and a
waking task preempts the running one sooner the larger its weight is against it.
The tick worker uses little CPU (≈ 1–2 % of a core for the demo cluster), so a
higher priority costs the others little and buys the tick its core when it wakes.

Lowering a nice value needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE`` that allows it
(``ulimit -e``; in docker-compose ``cap_add: [SYS_NICE]``); without it the process
keeps its priority and says so in one warning line (never a failed start).
"""
from __future__ import annotations

import logging
import os

__all__ = ["apply_nice", "worker_nice"]

log = logging.getLogger(__name__)


def worker_nice(environ: dict[str, str] | None = None) -> int | None:
    """``TWIN_WORKER_NICE`` (−20 highest priority … 19 lowest); None: unset (as is).

    >>> worker_nice({"TWIN_WORKER_NICE": "-5"}), worker_nice({})
    (-5, None)
    """
    env = os.environ if environ is None else environ
    raw = env.get("TWIN_WORKER_NICE", "").strip()
    if not raw:
        return None
    try:
        nice = int(raw)
    except ValueError:
        raise ValueError(f"TWIN_WORKER_NICE={raw!r} is not a whole number (-20 to 19)") \
            from None
    if not -20 <= nice <= 19:
        raise ValueError(f"TWIN_WORKER_NICE={nice}: give -20 (highest priority) to 19 "
                         f"(lowest)")
    return nice


def apply_nice(nice: int, who: str = "this process") -> int:
    """Set this process's nice value to ``nice`` (absolute, not an increment; children
    forked later inherit it). Returns the nice value it runs at: the old one, with a
    warning, when the system refuses a higher priority."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if nice == before:
        return nice
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        log.warning("%s stays at nice %d: nice %d needs CAP_SYS_NICE or ulimit -e >= %d "
                    "(docker-compose: cap_add: [SYS_NICE])", who, before, nice, 20 - nice)
        return before
    log.info("%s runs at nice %d (was %d)", who, nice, before)
    return nice
