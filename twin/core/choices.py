"""Choices as classes with labels and colours the UI reuses (NetBox ``ChoiceSet``),
and the choice sets more than one app uses."""
from __future__ import annotations

__all__ = ["ChoiceSet", "JobStatusChoices"]


class ChoiceSet:
    """Subclasses declare ``CHOICES = [(value, label, colour), ...]``.

    ``choices()`` feeds model fields; ``colours`` feeds badges in admin and UI.
    """

    CHOICES: list[tuple[str, str, str]] = []

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        return [(value, label) for value, label, _ in cls.CHOICES]

    @classmethod
    def values(cls) -> list[str]:
        return [value for value, _, _ in cls.CHOICES]

    @classmethod
    def colour(cls, value: str) -> str:
        return {v: c for v, _, c in cls.CHOICES}.get(value, "gray")

    @classmethod
    def label(cls, value: str) -> str:
        return {v: lbl for v, lbl, _ in cls.CHOICES}.get(value, value)


class JobStatusChoices(ChoiceSet):
    """Where a background job (a scenario run, a cluster build) is.

    One set for every job model, so the admin badges, the API enum and the
    runner's compare-and-set transitions (``twin.core.jobs.runner``) agree.
    """

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CHOICES = [
        (QUEUED, "Queued", "gray"),
        (RUNNING, "Running", "blue"),
        (SUCCEEDED, "Succeeded", "green"),
        (FAILED, "Failed", "red"),
        (CANCELLED, "Cancelled", "orange"),
    ]

    #: States a job never leaves.
    FINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
    #: States a job can still be cancelled from.
    ACTIVE = frozenset({QUEUED, RUNNING})
