"""Choice sets of the jobs on the twin, with colours the admin and dashboard reuse."""
from twin.core.choices import ChoiceSet

__all__ = ["JobStateChoices", "QosChoices", "TraceFormatChoices"]


class JobStateChoices(ChoiceSet):
    """Where a submitted job is.

    ``queued``: it did not fit when submitted (or gave its cards back) and holds
    nothing; ``running``: it holds its allocations; ``completed`` / ``cancelled``:
    final, its allocations released. Only a running job holds cards (checked in
    ``Allocation.clean`` and by the submit/cancel service).
    """

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    CHOICES = [
        (QUEUED, "Queued", "gray"),
        (RUNNING, "Running", "blue"),
        (COMPLETED, "Completed", "green"),
        (CANCELLED, "Cancelled", "orange"),
    ]

    #: States a job never leaves.
    FINAL = frozenset({COMPLETED, CANCELLED})
    #: States a job can still be cancelled from.
    ACTIVE = frozenset({QUEUED, RUNNING})


class QosChoices(ChoiceSet):
    """Quality of service, as the Alibaba GPU trace (v2023) labels its pods:
    latency-sensitive (``LS``), best-effort (``BE``), and Kubernetes' classes."""

    LS = "LS"
    BE = "BE"
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"
    CHOICES = [
        (LS, "Latency-sensitive", "red"),
        (GUARANTEED, "Guaranteed", "purple"),
        (BURSTABLE, "Burstable", "blue"),
        (BE, "Best effort", "gray"),
    ]


class TraceFormatChoices(ChoiceSet):
    """Trace formats ``simulation.scheduling`` reads (the same names as ``replay_trace``)."""

    ALIBABA = "alibaba-gpu-2023"
    HELIOS = "helios"
    PHILLY = "philly"
    CHOICES = [
        (ALIBABA, "Alibaba GPU trace v2023", "orange"),
        (HELIOS, "Helios cluster_log.csv", "blue"),
        (PHILLY, "Philly cluster_job_log", "green"),
    ]
