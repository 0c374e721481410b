"""What scenario runs tell the twin's own ``/metrics`` (``twin.web.metrics`` serves it).

``twin_scenario_runs{kind,status}``: runs by kind and status, counted in the
database at scrape time (queued and running ones are the work in progress;
the others grow with use), so every web process answers the same.
"""
from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from twin.core.choices import JobStatusChoices

__all__ = ["families"]


def families() -> Iterator[Metric]:
    from twin.scenarios.models import ScenarioRun

    runs = GaugeMetricFamily("twin_scenario_runs", "Scenario runs by kind and status.",
                             labels=["kind", "status"])
    counts = {(row["kind"], row["status"]): row["n"] for row in
              ScenarioRun.objects.values("kind", "status").annotate(n=Count("id"))
              .order_by("kind", "status")}
    kinds = sorted({kind for kind, _ in counts})
    for kind in kinds:  # every status of a kind, zeros included (rate() needs them)
        for status in JobStatusChoices.values():
            runs.add_metric([kind, status], counts.get((kind, status), 0))
    yield runs
