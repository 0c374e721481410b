"""Fixtures of the jobs tests: running jobs written directly (for the invariants), a
built DGX unit (servers of 8 NVLink cards, one NIC per card on rail leaves)."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def running(tiny_cluster: dict[str, Any]):
    """``running(name, cards=1, share=1000, **fields)``: a job saved as running (no cards yet)."""
    from twin.jobs.choices import JobStateChoices
    from twin.jobs.models import Job

    def make(name: str, cards: int = 1, share: int = 1000, **fields: Any) -> Job:
        return Job.objects.create(cluster=tiny_cluster["cluster"], name=name,
                                  tenant=fields.pop("tenant", "team-a"), cards=cards,
                                  share_milli=share, state=JobStateChoices.RUNNING, **fields)

    return make


@pytest.fixture
def dgx_cluster(db) -> Any:
    """The DGX H100 SuperPOD preset, one scalable unit: 32 servers × 8 H100 on rails."""
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    result = build_cluster("dgx-h100-superpod", name="jobs-dgx", supernodes=1)
    return Cluster.objects.get(pk=result["cluster_id"])


@pytest.fixture
def published():
    """Names of the Celery tasks this process publishes during the test (none may leave
    a refused request)."""
    from celery.signals import before_task_publish

    names: list[str] = []

    def record(sender: Any = None, **kwargs: Any) -> None:
        names.append(str(sender))

    before_task_publish.connect(record, weak=False)
    try:
        yield names
    finally:
        before_task_publish.disconnect(record)
