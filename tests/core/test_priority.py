"""The Celery worker's CPU priority (``TWIN_WORKER_NICE``, ``twin.core.priority``).

Each check runs in a child Python process: a nice value, once raised, cannot be
lowered again without privilege, and the test process must keep its own.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from twin.core.priority import worker_nice


def _child(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **env}, check=True)
    return out.stdout.strip() + "|" + out.stderr


@pytest.mark.parametrize("raw", ["high", "2.5", "-21", "20"])
def test_a_bad_value_names_the_setting(raw: str) -> None:
    with pytest.raises(ValueError, match="TWIN_WORKER_NICE"):
        worker_nice({"TWIN_WORKER_NICE": raw})


def test_unset_leaves_the_priority_as_it_is() -> None:
    assert worker_nice({}) is None and worker_nice({"TWIN_WORKER_NICE": " "}) is None
    assert worker_nice({"TWIN_WORKER_NICE": "-5"}) == -5


def test_a_starting_worker_takes_the_nice_value_its_pool_inherits() -> None:
    """``celeryd_init`` (sent by ``celery worker`` before its pool forks) sets it."""
    got = _child("""
        import os
        import django
        django.setup()
        from celery.signals import celeryd_init
        from twin.celery import worker_priority
        before = os.getpriority(os.PRIO_PROCESS, 0)
        worker_priority()
        pid = os.fork()
        if pid == 0:
            os._exit(os.getpriority(os.PRIO_PROCESS, 0))
        _, status = os.waitpid(pid, 0)
        print(before, os.getpriority(os.PRIO_PROCESS, 0), os.waitstatus_to_exitcode(status))
    """, TWIN_WORKER_NICE="7", DJANGO_SETTINGS_MODULE="twin.settings")
    before, now, child = got.split("|")[0].split()
    assert (int(now), int(child)) == (7, 7) and int(before) != 7


def test_a_refused_higher_priority_is_one_warning_not_a_failed_start() -> None:
    """Without CAP_SYS_NICE (or an ``RLIMIT_NICE`` that allows it) the worker keeps
    its nice value and says what would allow the one asked for."""
    got = _child("""
        import logging, os, resource
        logging.basicConfig(level=logging.WARNING)
        from twin.core.priority import apply_nice
        os.setpriority(os.PRIO_PROCESS, 0, 5)
        resource.setrlimit(resource.RLIMIT_NICE, (0, resource.getrlimit(resource.RLIMIT_NICE)[1]))
        if os.geteuid() == 0:
            os.setuid(65534)  # (nobody: no CAP_SYS_NICE)
        print(apply_nice(-5, "the worker"), os.getpriority(os.PRIO_PROCESS, 0))
    """)
    out, err = got.split("|", 1)
    assert out.split() == ["5", "5"]
    assert "the worker stays at nice 5: nice -5 needs CAP_SYS_NICE" in err
