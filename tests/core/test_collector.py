"""The garbage-collector tools of long-lived processes (``twin.core.collector``)."""
from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from twin.core.api.renderers import LargeJSONRenderer
from twin.core.collector import collector_paused, freeze_startup_objects
from twin.core.localnet import free_port
from twin.embedded import stop_embedded_redis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def unfrozen():
    """Nothing frozen before the test (importing ``twin.asgi`` elsewhere in this
    process froze its objects) nor after it."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_moves_what_exists_out_of_collections(unfrozen):
    before = len(gc.get_objects())
    frozen = freeze_startup_objects()
    assert frozen == gc.get_freeze_count() >= before // 2
    assert len(gc.get_objects()) < before // 2  # a collection no longer walks them
    made_after = [[k] for k in range(1000)]
    tracked = {id(o) for o in gc.get_objects()}
    assert all(id(x) in tracked for x in made_after)  # new objects are still collected


def test_collector_paused_for_the_block_and_back_after_an_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_collector_paused_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_paused_nested_enables_once_the_outer_block_ends():
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


class _Probe:
    """DRF's encoder turns an object with ``tolist`` into its list: records whether
    the collector ran while the renderer encoded it."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def tolist(self) -> list[int]:
        self.seen.append(gc.isenabled())
        return [1, 2]


def test_large_json_renderer_renders_with_the_collector_paused():
    probe = _Probe()
    body = LargeJSONRenderer().render({"rows": [{"a": 1.5, "b": None}], "probe": probe})
    assert body == b'{"rows":[{"a":1.5,"b":null}],"probe":[1,2]}'
    assert probe.seen == [False]
    assert gc.isenabled()


def test_the_history_endpoint_renders_with_it():
    from twin.telemetry.api.views import MinuteViewSet

    assert MinuteViewSet.renderer_classes[0] is LargeJSONRenderer


def test_the_asgi_application_starts_with_its_views_imported_and_frozen(tmp_path):
    """What uvicorn imports: every view loaded, the start-up objects frozen."""
    probe = ("import gc, sys\nimport twin.asgi\n"
             "print(gc.get_freeze_count(), 'twin.telemetry.api.views' in sys.modules)")
    # With no REDIS_URL the ASGI app starts the embedded Redis and leaves it to the
    # processes that share it (``twin.embedded``): on a port of its own, stopped here,
    # so the test leaves no redis-server behind.
    port = free_port()
    try:
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                             text=True, timeout=120,
                             env={"PATH": "/usr/bin:/bin", "TWIN_ALLOW_INSECURE_KEY": "1",
                                  "TWIN_VAR_DIR": str(tmp_path),
                                  "TWIN_EMBEDDED_REDIS_PORT": str(port)})
    finally:
        stop_embedded_redis(port)
    assert out.returncode == 0, out.stderr
    count, views = out.stdout.split()
    assert int(count) > 50_000 and views == "True"


def test_a_worker_process_freezes_its_start_up_objects(unfrozen):
    from celery.signals import worker_process_init

    import twin.celery  # noqa: F401 - connects the handler

    assert gc.get_freeze_count() == 0
    worker_process_init.send(sender=None)
    assert gc.get_freeze_count() > 50_000
