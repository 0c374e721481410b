"""Choice sets of scenario runs, with the colours the admin and UI reuse."""
from twin.core.choices import ChoiceSet

__all__ = ["ScenarioStatusChoices"]


class ScenarioStatusChoices(ChoiceSet):
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

    #: States a run never leaves.
    FINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
    #: States a run can still be cancelled from.
    ACTIVE = frozenset({QUEUED, RUNNING})
