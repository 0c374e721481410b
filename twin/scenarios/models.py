"""One scenario run: what was asked, what the simulation ran on, how far it got.

``params`` is the request as the client sent it; ``inputs`` is what the
simulation actually runs on — the parameters after validation, with the
cluster converted to the simulation's plain dataclasses (as JSON) — so a run
is reproducible after the cluster changes, and ``snapshot`` the live state
it was forked from (``twin.scenarios.snapshot``), if any; and ``params_hash`` (a hash of
``kind`` + ``inputs`` + the engine version) finds an earlier identical run
whose result can be reused.

Status, progress, outcome and worker are the fields of every job
(:class:`twin.core.jobs.Job`), changed only by compare-and-set updates of the
one runner (:mod:`twin.core.jobs.runner`): a cancelled run stays cancelled even
when its worker finishes a moment later.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from twin.core.jobs import Job

__all__ = ["ScenarioPart", "ScenarioRun", "group_name"]


class ScenarioRun(Job):
    """One scenario run; status, progress, outcome and worker come from ``Job``."""

    kind = models.CharField(max_length=32, db_index=True,
                            help_text="Scenario kind (topology, route, failure, collective).")
    params = models.JSONField(default=dict, blank=True, help_text="Parameters as requested.")
    inputs = models.JSONField(default=dict, blank=True,
                              help_text="Validated inputs the simulation runs on.")
    snapshot = models.JSONField(
        null=True, blank=True,
        help_text="The live state the inputs were taken from (a fork: "
                  "simulation.snapshot.LiveSnapshot as JSON); null when none was read.")
    params_hash = models.CharField(max_length=64, db_index=True, blank=True,
                                   help_text="SHA-256 of kind + inputs + engine version.")
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="scenario_runs")
    cached_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="reused_by",
                                    help_text="The earlier run whose result this one reused.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="scenario_runs")

    class Meta(Job.Meta):
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1),
                                   name="scenariorun_progress_0_1"),
        ]
        indexes = [models.Index(fields=["params_hash", "status"], name="scenariorun_cache")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} ({self.status})"

    @property
    def group_name(self) -> str:
        """The Channels group its progress goes to."""
        return group_name(self.pk)


class ScenarioPart(Job):
    """One part of a split run (a sweep: configurations, policies, intervals),
    computed by a Celery task of its own so the parts spread over every worker.

    ``part`` is the kind's small description of its share (the run's ``inputs``
    are read from the run, not copied); ``result`` holds the partial result until
    the run is merged (then it is cleared). Status, progress, heartbeat and
    worker are a job's, so the parts have the runner's lifecycle, reaper and
    orphan recovery (``twin.scenarios.sweeps``).
    """

    run = models.ForeignKey(ScenarioRun, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveIntegerField(help_text="Position among the run's parts (from 0).")
    part = models.JSONField(default=dict, blank=True,
                            help_text="The kind's description of this part's share.")

    class Meta(Job.Meta):
        ordering = ["run", "index"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1),
                                   name="scenariopart_progress_0_1"),
            models.UniqueConstraint(fields=["run", "index"], name="scenariopart_run_index"),
        ]

    def __str__(self) -> str:
        return f"#{self.run_id}.{self.index} ({self.status})"


def group_name(run_id: int) -> str:
    """Channels group of run ``run_id`` (``ws/scenarios/<id>/`` joins it)."""
    return f"scenario.{int(run_id)}"
