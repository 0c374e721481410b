"""Allocations in place before a simulation's first arrival (``simulate(initial=...)``).

The twin's ``from_live`` pins its running jobs to the cards they hold: each entry
``{"placement": [[node, card, share 0..1], ...], "cpu_milli", "memory_mib",
"remaining_s"}`` is allocated on the run's cluster state before the first
arrival; in ``full`` mode an entry with ``remaining_s`` is released then (a SimPy
timeout) and the queue dispatches as after any completion; otherwise it is held
for the whole run.

A pinned entry's expected end (now + ``remaining_s``) is also what EASY
backfilling's reservation counts as the time its cards free up (Lifka 1995;
Mu'alem & Feitelson 2001: the head's shadow time is the earliest time enough
resources are free, the running jobs' expected ends included): the entry is kept
in ``run.pinned_running`` until released, next to the workload's ``running``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import simpy

from .errors import SchedulingInputError
from .policies import JobRequest
from .state import Placement

if TYPE_CHECKING:
    from .engine import _Run

__all__ = ["pin_initial"]


def pin_initial(run: _Run, initial: Sequence[Mapping[str, Any]]) -> None:
    """Allocate ``initial`` (see :func:`simulate`) before the first arrival.

    Each entry's pieces must name an existing healthy card with the share left;
    an entry with ``remaining_s`` in ``full`` mode is released at that time (the
    queue then dispatches as after any completion). Raises
    :class:`SchedulingInputError` naming ``initial[i].<key>``.
    """
    st, nodes = run.st, run.nodes
    healthy = nodes.healthy()
    for i, entry in enumerate(initial):
        path = f"initial[{i}]"
        if not isinstance(entry, Mapping):
            raise SchedulingInputError(path, "must be an object")
        pl: Placement = []
        for k, piece in enumerate(entry.get("placement") or []):
            where = f"{path}.placement[{k}]"
            try:
                n, c, share = int(piece[0]), int(piece[1]), float(piece[2])
            except (TypeError, ValueError, IndexError) as exc:
                raise SchedulingInputError(where, "must be [node, card, share]") from exc
            milli = int(round(share * 1000))
            if not 0 <= n < len(nodes) or not -1 <= c < nodes.max_gpus:
                raise SchedulingInputError(where, f"no card ({n}, {c}) in this cluster")
            if c >= 0 and (not healthy[n, c] or not 0 < milli <= int(st.free[n, c])):
                raise SchedulingInputError(
                    where, f"card ({n}, {c}) is failed or has less than {share:g} left")
            pl.append((n, c, milli if c >= 0 else 0))
        if not pl:
            raise SchedulingInputError(f"{path}.placement", "must list at least one piece")
        cpu, mem = int(entry.get("cpu_milli", 0) or 0), int(entry.get("memory_mib", 0) or 0)
        st.allocate(pl, cpu, mem)
        run.pinned += 1
        remaining = entry.get("remaining_s")
        if run.mode == "full" and remaining is not None:
            if not float(remaining) >= 0:
                raise SchedulingInputError(f"{path}.remaining_s", "must be >= 0 (or None)")

            cards = sum(1 for _, c, _ in pl if c >= 0)
            req = JobRequest(cards, 1000 if cards != 1 else pl[0][2], cpu, mem)
            run.pinned_running[i] = (float(remaining), req.demand_milli, pl, req)

            def release(_event: simpy.Event, pl: Placement = pl, cpu: int = cpu,
                        mem: int = mem, i: int = i) -> None:
                run.pinned_running.pop(i, None)
                run.st.release(pl, cpu, mem)
                run.dispatch()
                run.record()

            run.env.timeout(float(remaining)).callbacks.append(release)
